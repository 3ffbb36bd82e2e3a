import DepotCore
import Foundation

/// A line of `depot load` input that is not a record.
package struct LoadLineError: Error {
    /// The 1-based line the bad record starts on.
    package let line: Int
    /// What is wrong with it (`.decoding` for malformed input).
    package let error: DepotError
    /// `true` when the line has no id and the collection's ids are not assigned by the store.
    package var needsID = false

    /// The error of `line`.
    package init(line: Int, error: DepotError, needsID: Bool = false) {
        self.line = line
        self.error = error
        self.needsID = needsID
    }
}

/// One line of `depot load` input: a record with its id, or fields for the store to give an
/// id (Docs/CLI.md, `depot load`).
package enum LoadItem {
    /// An object with an "id": saved (inserted or replaced) by that id.
    case record(Record)
    /// An object without one: inserted with an id the store assigns.
    case fields([String: FieldValue])

    /// Reads an object with an "id" as a record, one without as fields.
    /// - Throws: `.decoding` when `json` is not an object, or its "id" is not an integer or a string.
    package init(json: FieldValue) throws {
        if case .object(let members) = json, members["id"] == nil {
            self = .fields(members)
        } else {
            self = .record(try Record(jsonObject: json))
        }
    }

    /// The id kind a new collection gets from this item: assigned ids are integers.
    package var idKind: IDKind {
        switch self {
        case .record(let record): record.id.kind
        case .fields: .int
        }
    }
}

/// The field lists of `depot load --unique F[,F]` and `--index F[,F]`.
package enum FieldListOption {
    /// Splits `F[,F]` into validated field names (spaces around each name are dropped).
    /// - Parameter option: the option's name for the message, e.g. `--unique`.
    /// - Throws: a usage ``CLIFailure`` naming the first name that is not a valid field name.
    package static func fields(_ text: String, option: String) throws -> [String] {
        let fields = OptionText.split(text, on: ",").map(OptionText.trimmed)
        for field in fields where !FieldName.isValid(field) {
            throw CLIFailure.usage("\(option) \(WhereParser.quoted(text)): \(WhereParser.quoted(field)) is not a valid field name", "write \(option) FIELD or \(option) FIELD1,FIELD2")
        }
        return fields
    }
}
