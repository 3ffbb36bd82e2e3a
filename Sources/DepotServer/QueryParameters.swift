import DepotCore
import DepotWire
import Foundation

/// The query string of a request, read with json-server conventions.
///
/// - Paging: `_page` (from 1) with `_per_page` (default 10); or `_start` with `_end` or
///   `_limit`; or `_limit` alone. No paging parameter lists everything.
/// - Sorting: `_sort=a,-b` (a `-` means descending); `_order=desc` (comma-separated, one
///   per key) is accepted for keys without a `-`.
/// - Filters: `f=v` (several `f=` mean any of them), `f_ne=v`, `f_lt`, `f_lte`, `f_gt`,
///   `f_gte`. A value is a JSON literal when it parses as one (`12`, `1.5`, `true`, `null`,
///   `"12"`), else text.
struct QueryParameters {
    private(set) var pairs: [(String, String)] = []

    /// Reads `query` (without the `?`): `&`-separated `key=value` pairs, `+` as a space, then
    /// percent-decoded. Separators are found among Unicode scalars, not Characters: a scalar
    /// that joins the next one into a Character (U+0603 before `&`) must not hide a separator
    /// (the flaw fixed in `StoreLocation`, Docs/Fuzzing.md, "What it found").
    /// - Throws: a 400 when a key or value is not valid percent-encoded text.
    init(_ query: String) throws {
        func text(_ scalars: Substring.UnicodeScalarView.SubSequence) -> String {
            var view = String.UnicodeScalarView()
            view.append(contentsOf: scalars.lazy.map { $0 == "+" ? " " : $0 })
            return String(view)
        }
        for part in Substring(query).unicodeScalars.split(separator: "&", omittingEmptySubsequences: true) {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let rawKey = text(pieces[0])
            let rawValue = pieces.count > 1 ? text(pieces[1]) : ""
            guard let key = rawKey.removingPercentEncoding, let value = rawValue.removingPercentEncoding else {
                throw HTTPFailure.badRequest("The query string is not valid percent-encoded text.")
            }
            pairs.append((key, value))
        }
    }

    func values(_ key: String) -> [String] { pairs.filter { $0.0 == key }.map(\.1) }
    func single(_ key: String) -> String? { values(key).last }

    func int(_ key: String) throws -> Int? {
        guard let text = single(key) else { return nil }
        guard let value = Int(text) else { throw HTTPFailure.badRequest("Parameter '\(key)' must be an integer.") }
        return value
    }

    static let reserved: Set<String> = ["_page", "_per_page", "_limit", "_start", "_end", "_sort", "_order", "_embed", "_expand"]
    static let operators: [(String, @Sendable (String, FieldValue) -> Filter)] = [
        ("_lte", { .lessOrEqual($0, $1) }), ("_gte", { .greaterOrEqual($0, $1) }),
        ("_ne", { .notEqual($0, $1) }), ("_lt", { .less($0, $1) }), ("_gt", { .greater($0, $1) }),
    ]

    static func isField(_ name: String) -> Bool { name == "id" || FieldName.isValid(name) }

    /// Reads a query-string value as json-server does: a JSON scalar when the text is one
    /// (`12`, `1.5`, `true`, `false`, `null`, `"quoted"`), otherwise the text itself (an
    /// array, an object or a tagged value is text too). Not being JSON is not an error here:
    /// it is what makes `?title=Dune` mean the string.
    static func literal(_ text: String) -> FieldValue {
        let value: FieldValue
        do { value = try JSONText.parse(text) } catch { return .string(text) }
        switch value {
        case .null, .bool, .int, .string: return value
        case .double(let d) where d.isFinite: return value
        default: return .string(text)
        }
    }

    /// The query these parameters describe.
    /// - Throws: ``HTTPFailure`` 400 for unknown `_` parameters, bad numbers, bad field names.
    func query(maxPageSize: Int) throws -> Query {
        var query = Query()
        // Filters
        var equalities: [String: [FieldValue]] = [:]
        var order: [String] = []
        var filters: [Filter] = []
        for (key, value) in pairs where !Self.reserved.contains(key) {
            guard !key.hasPrefix("_") else {
                throw HTTPFailure.badRequest("Parameter \(RequestHandler.quoted(key)) is not a known option.")
            }
            var matched = false
            for (suffix, make) in Self.operators where key.hasSuffix(suffix) {
                let field = String(key.dropLast(suffix.count))
                if Self.isField(field) {
                    filters.append(make(field, Self.literal(value)))
                    matched = true
                    break
                }
            }
            if matched { continue }
            guard Self.isField(key) else {
                throw HTTPFailure.badRequest("Parameter \(RequestHandler.quoted(key)) is not a known option or a valid field name.")
            }
            if equalities[key] == nil { order.append(key) }
            equalities[key, default: []].append(Self.literal(value))
        }
        for key in order {
            let values = equalities[key] ?? []
            filters.append(values.count == 1 ? .equal(key, values[0]) : .isIn(key, values))
        }
        query.filter = filters.reduce(Filter.all) { $0 && $1 }
        // Sorting
        if let sort = single("_sort") {
            let orders = (single("_order") ?? "").split(separator: ",").map { $0.lowercased() }
            for (n, part) in sort.split(separator: ",").enumerated() {
                var name = String(part).trimmingCharacters(in: .whitespaces)
                var descending = false
                if name.hasPrefix("-") {
                    descending = true
                    name.removeFirst()
                } else if n < orders.count {
                    descending = orders[n] == "desc"
                }
                guard Self.isField(name) else { throw HTTPFailure.badRequest("Cannot sort by \(RequestHandler.quoted(name)).") }
                query.sort.append(SortKey(name, descending: descending))
            }
        }
        // Paging
        if let page = try int("_page") {
            let perPage = try int("_per_page") ?? int("_limit") ?? 10
            guard page >= 1, perPage >= 1, perPage <= maxPageSize else {
                throw HTTPFailure.badRequest("'_page' must be 1 or more and '_per_page' between 1 and \(maxPageSize).")
            }
            let (offset, overflow) = (page - 1).multipliedReportingOverflow(by: perPage)
            guard !overflow else { throw HTTPFailure.badRequest("'_page' is too large.") }
            query.offset = offset
            query.limit = perPage
        } else if let start = try int("_start") {
            guard start >= 0 else { throw HTTPFailure.badRequest("'_start' must not be negative.") }
            query.offset = start
            if let end = try int("_end") {
                guard end >= start else { throw HTTPFailure.badRequest("'_end' must not be before '_start'.") }
                query.limit = end - start
            } else if let limit = try int("_limit") {
                guard limit >= 0 else { throw HTTPFailure.badRequest("'_limit' must not be negative.") }
                query.limit = limit
            }
        } else if let end = try int("_end") {
            guard end >= 0 else { throw HTTPFailure.badRequest("'_end' must not be negative.") }
            query.limit = end
        } else if let limit = try int("_limit") {
            guard limit >= 0 else { throw HTTPFailure.badRequest("'_limit' must not be negative.") }
            query.limit = limit
        }
        do { try query.validate() } catch let error as DepotError { throw HTTPFailure.badRequest(error.message) }
        return query
    }
}
