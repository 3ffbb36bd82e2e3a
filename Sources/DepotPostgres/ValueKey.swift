import DepotCore
import Foundation

/// How a top-level field value is stored in its `bytea` column: one *kind byte* followed by an
/// order-preserving body, so that PostgreSQL's binary `bytea` comparison gives exactly the
/// query semantics of Docs/Semantics.md, "Queries" and "Ordering" (Docs/PostgresDriver.md,
/// "Layout"):
///
/// - kinds order by their byte: bool `0x10` < number `0x20` < string `0x30` < bytes `0x40`
///   < array `0x50` < object `0x60` (null and missing are SQL `NULL`);
/// - a bool is `0x00` or `0x01`;
/// - a number is 16 bytes that compare like the exact value, whether it is an `Int64` or a
///   `Double`: the largest double not above the value (sign-flipped bits, big-endian) then
///   what the integer adds to it (unsigned, big-endian). An int and a double of equal value
///   have the same key, which is what query equality and unique constraints want; whether it
///   was a double (or `-0.0`) is kept in the row's `_depotsys_doubles` column;
/// - strings and bytes are their bytes as they are, so prefix and substring tests are byte
///   tests with no wildcard;
/// - arrays and objects are Depot's canonical JSON text (``JSONText``): exact structure.
enum ValueKey {
    static let boolKind: UInt8 = 0x10
    static let numberKind: UInt8 = 0x20
    static let stringKind: UInt8 = 0x30
    static let bytesKind: UInt8 = 0x40
    static let arrayKind: UInt8 = 0x50
    static let objectKind: UInt8 = 0x60

    /// What the key of a number loses: the value was a double, or the double `-0.0`.
    enum NumberForm: Equatable {
        case int, double, negativeZero
    }

    /// The kind byte a value's key starts with; `nil` for null.
    static func kindByte(_ value: FieldValue) -> UInt8? {
        switch value {
        case .null: nil
        case .bool: boolKind
        case .int, .double: numberKind
        case .string: stringKind
        case .bytes: bytesKind
        case .array: arrayKind
        case .object: objectKind
        }
    }

    /// The key of a non-null value, and the form of a number (`nil` for other kinds).
    static func encode(_ value: FieldValue) -> (key: [UInt8], form: NumberForm?) {
        switch value {
        case .null: return ([], nil)
        case .bool(let b): return ([boolKind, b ? 1 : 0], nil)
        case .int(let i): return (numberKey(i), .int)
        case .double(let d):
            let form: NumberForm = d == 0 && d.sign == .minus ? .negativeZero : .double
            return (numberKey(d), form)
        case .string(let s): return ([stringKind] + Array(s.utf8), nil)
        case .bytes(let data): return ([bytesKind] + Array(data), nil)
        case .array: return ([arrayKind] + Array(JSONText.serialize(value).utf8), nil)
        case .object: return ([objectKind] + Array(JSONText.serialize(value).utf8), nil)
        }
    }

    /// The largest double not above `i`, and how much `i` exceeds it.
    static func split(_ i: Int64) -> (Double, UInt64) {
        var d = Double(i)
        if QueryEvaluator.compareIntDouble(i, d) < 0 { d = d.nextDown }
        // d is within [-2^63, 2^63 - 1024] here, so the conversion is exact and in range.
        let base = Int64(d)
        return (d, UInt64(bitPattern: i &- base))
    }

    static func numberKey(_ i: Int64) -> [UInt8] {
        let (d, rest) = split(i)
        return numberKey(d, rest: rest)
    }

    static func numberKey(_ d: Double) -> [UInt8] {
        numberKey(d == 0 ? 0.0 : d, rest: 0)
    }

    private static func numberKey(_ d: Double, rest: UInt64) -> [UInt8] {
        let bits = d.bitPattern
        let ordered = bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
        var out: [UInt8] = [numberKind]
        out.reserveCapacity(17)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: ordered >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: rest >> UInt64(shift))) }
        return out
    }

    /// The value a stored key holds.
    /// - Throws: `.corrupted` when the bytes are not a key Depot wrote.
    static func decode(_ key: UnsafeRawBufferPointer, form: NumberForm) throws -> FieldValue {
        guard let kind = key.first else { throw corrupt("an empty value") }
        let body = UnsafeRawBufferPointer(rebasing: key.dropFirst())
        switch kind {
        case boolKind:
            guard body.count == 1, let b = body.first, b <= 1 else { throw corrupt("a bool") }
            return .bool(b == 1)
        case numberKind:
            guard body.count == 16 else { throw corrupt("a number") }
            let ordered = UInt64(bigEndian: body.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            let rest = UInt64(bigEndian: body.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            let bits = ordered & (1 << 63) != 0 ? ordered & ~(1 << 63) : ~ordered
            let d = Double(bitPattern: bits)
            switch form {
            case .negativeZero:
                return .double(-0.0)
            case .double:
                guard rest == 0 else { throw corrupt("a double") }
                return .double(d)
            case .int:
                guard d.isFinite, d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0, d.rounded(.towardZero) == d, rest < 4096 else {
                    throw corrupt("an integer")
                }
                let (sum, overflow) = Int64(d).addingReportingOverflow(Int64(rest))
                guard !overflow else { throw corrupt("an integer") }
                return .int(sum)
            }
        case stringKind:
            guard let s = String(exactUTF8: body) else { throw corrupt("a string") }
            return .string(s)
        case bytesKind:
            return .bytes(Data(body))
        case arrayKind, objectKind:
            do {
                let value = try JSONText.parse(Array(body))
                switch (kind, value) {
                case (arrayKind, .array), (objectKind, .object): return value
                default: throw corrupt("a nested value")
                }
            } catch let error as DepotError where error.code == .corrupted {
                throw error
            } catch {
                throw DepotError(.corrupted, "A nested value in the PostgreSQL store is not Depot JSON.", cause: DepotError.wrap(error))
            }
        default:
            throw corrupt("a value of unknown kind")
        }
    }

    private static func corrupt(_ what: String) -> DepotError {
        DepotError(.corrupted, "The PostgreSQL store holds \(what) that Depot did not write.")
    }

    // MARK: The doubles column

    /// The `_depotsys_doubles` text of a record's number forms: `,name,` for a double and
    /// `,-name,` for `-0.0`; `nil` when every number is an integer.
    static func doublesText(_ forms: [(String, NumberForm)]) -> String? {
        var text = ""
        for (name, form) in forms {
            switch form {
            case .int: continue
            case .double: text += "," + name
            case .negativeZero: text += ",-" + name
            }
        }
        return text.isEmpty ? nil : text + ","
    }

    /// Reads a `_depotsys_doubles` text back.
    static func parseDoubles(_ text: String) -> [Substring: NumberForm] {
        guard !text.isEmpty else { return [:] }
        var out: [Substring: NumberForm] = [:]
        for part in text.split(separator: ",") {
            if part.hasPrefix("-") { out[part.dropFirst()] = .negativeZero } else { out[part] = .double }
        }
        return out
    }
}
