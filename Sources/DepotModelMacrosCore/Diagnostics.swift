import SwiftDiagnostics

/// Everything the `@Model` macro refuses, one case per rule (Docs/Models.md, "Diagnostics").
enum ModelDiagnostic: DiagnosticMessage {
    case notAStructOrFinalClass(kind: String)
    case noID(type: String)
    case twoIDs(first: String, second: String)
    case unsupportedIDType(property: String, type: String)
    case assignedIDLet(property: String)
    case attributeOnID(attribute: String)
    case missingType(property: String)
    case transientWithoutValue(property: String)
    case attributeOnComputed(attribute: String, property: String)
    case attributeOnStatic(attribute: String, property: String)
    case transientConflict(attribute: String, property: String)
    case letWithValue(property: String)
    case lazyProperty(property: String)
    case unsupportedPattern
    case invalidStoredName(name: String, property: String)
    case duplicateStoredName(name: String, first: String, second: String)
    case notALiteral(argument: String)
    case invalidCollectionName(name: String)
    case unknownField(name: String, argument: String)
    case notAField(name: String, argument: String, reason: String)
    case repeatedField(name: String, argument: String)
    case emptyFieldList(argument: String)
    case duplicateAttribute(attribute: String, property: String)

    var severity: DiagnosticSeverity { .error }

    var diagnosticID: MessageID {
        let id: String
        switch self {
        case .notAStructOrFinalClass: id = "notAStructOrFinalClass"
        case .noID: id = "noID"
        case .twoIDs: id = "twoIDs"
        case .unsupportedIDType: id = "unsupportedIDType"
        case .assignedIDLet: id = "assignedIDLet"
        case .attributeOnID: id = "attributeOnID"
        case .missingType: id = "missingType"
        case .transientWithoutValue: id = "transientWithoutValue"
        case .attributeOnComputed: id = "attributeOnComputed"
        case .attributeOnStatic: id = "attributeOnStatic"
        case .transientConflict: id = "transientConflict"
        case .letWithValue: id = "letWithValue"
        case .lazyProperty: id = "lazyProperty"
        case .unsupportedPattern: id = "unsupportedPattern"
        case .invalidStoredName: id = "invalidStoredName"
        case .duplicateStoredName: id = "duplicateStoredName"
        case .notALiteral: id = "notALiteral"
        case .invalidCollectionName: id = "invalidCollectionName"
        case .unknownField: id = "unknownField"
        case .notAField: id = "notAField"
        case .repeatedField: id = "repeatedField"
        case .emptyFieldList: id = "emptyFieldList"
        case .duplicateAttribute: id = "duplicateAttribute"
        }
        return MessageID(domain: "DepotModel", id: id)
    }

    var message: String {
        switch self {
        case .notAStructOrFinalClass(let kind):
            return "@Model applies to a struct or a final class, not \(kind)"
        case .noID(let type):
            return "\(type) has no id: mark one property @ID, or name it 'id'"
        case .twoIDs(let first, let second):
            return "'\(second)' is a second id; '\(first)' is already the id"
        case .unsupportedIDType(let property, let type):
            return "the id '\(property)' is a \(type); an id must be String, Int, Int64, UUID, Int? or Int64?"
        case .assignedIDLet(let property):
            return "the id '\(property)' is assigned by the store on insert, so it must be 'var'"
        case .attributeOnID(let attribute):
            return "@\(attribute) does not apply to the id, which is the record id and not a field"
        case .missingType(let property):
            return "'\(property)' needs a type annotation: @Model reads the type as written"
        case .transientWithoutValue(let property):
            return "@Transient '\(property)' needs an initial value, used when a model is read"
        case .attributeOnComputed(let attribute, let property):
            return "@\(attribute) does not apply to '\(property)', a computed property, which is not stored"
        case .attributeOnStatic(let attribute, let property):
            return "@\(attribute) does not apply to '\(property)', a static property, which is not stored"
        case .transientConflict(let attribute, let property):
            return "@\(attribute) does not apply to '\(property)', which is @Transient and not stored"
        case .letWithValue(let property):
            return "'\(property)' is a 'let' with an initial value, so it cannot be read from a record: make it 'var' or mark it @Transient"
        case .lazyProperty(let property):
            return "'\(property)' is lazy and cannot be stored: mark it @Transient"
        case .unsupportedPattern:
            return "@Model needs one name per stored property, not a tuple pattern"
        case .invalidStoredName(let name, let property):
            return "'\(name)' (stored name of '\(property)') is not a valid field name: use 1 to 63 ASCII letters, digits or '_', not starting with a digit, not 'id', not starting with '_depot'; choose another with @Stored(\"name\")"
        case .duplicateStoredName(let name, let first, let second):
            return "'\(second)' is stored as '\(name)', like '\(first)'"
        case .notALiteral(let argument):
            return "\(argument) must be written as a literal"
        case .invalidCollectionName(let name):
            return "'\(name)' is not a valid collection name: use 1 to 63 ASCII letters, digits or '_', starting with a letter"
        case .unknownField(let name, let argument):
            return "\(argument) names '\(name)', which is not a stored property of this type"
        case .notAField(let name, let argument, let reason):
            return "\(argument) names '\(name)', which \(reason)"
        case .repeatedField(let name, let argument):
            return "\(argument) names '\(name)' twice in one list"
        case .emptyFieldList(let argument):
            return "\(argument) holds an empty list of fields"
        case .duplicateAttribute(let attribute, let property):
            return "'\(property)' carries @\(attribute) twice"
        }
    }
}
