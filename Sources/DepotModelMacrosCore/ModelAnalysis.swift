import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// What the `@Model` macro learned from a type's declaration: everything the expansion
/// writes, already checked (Docs/Models.md).
struct ModelAnalysis {
    /// One stored field (not the id, not transient).
    struct Field {
        /// The property's name as written (backticks kept), for `self.` access.
        var property: String
        /// The property's name without backticks, for messages and the lists of the type.
        var name: String
        /// The stored field name.
        var storedName: String
        /// The type to decode: the wrapped type of an optional.
        var decodedType: String
        var isOptional: Bool
        var transform: ExprSyntax?
        var defaultValue: ExprSyntax?
        var unique: Bool
        var indexed: Bool
    }

    /// The id property.
    struct ID {
        var property: String
        var type: String
        var isMutable: Bool
    }

    var typeName: String
    var isClass: Bool
    /// `"public "`, `"package "` or `""`: the access of the generated members.
    var access: String
    var id: ID
    var fields: [Field]
    var collection: String?
    /// Unique constraints and indexes as stored field names, in declaration order.
    var uniqueConstraints: [[String]]
    var indexes: [[String]]
}

/// The attribute macros `@Model` reads on properties.
enum PropertyAttribute: String, CaseIterable {
    case id = "ID", unique = "Unique", indexed = "Indexed", transient = "Transient"
    case stored = "Stored", transform = "Transform", `default` = "Default"
}

/// The `@Model` attributes found on one property declaration.
struct PropertyMarks {
    var found: [PropertyAttribute: AttributeSyntax] = [:]
    var order: [PropertyAttribute] = []

    func has(_ attribute: PropertyAttribute) -> Bool { found[attribute] != nil }

    /// The first argument's expression of `attribute`, if it has one.
    func argument(_ attribute: PropertyAttribute) -> ExprSyntax? {
        guard case .argumentList(let list) = found[attribute]?.arguments else { return nil }
        return list.first?.expression
    }
}

/// Checks a declaration and reports every rule it breaks; `nil` when there was one.
struct ModelAnalyzer {
    let node: AttributeSyntax
    let declaration: any DeclGroupSyntax
    private(set) var diagnostics: [Diagnostic] = []

    init(node: AttributeSyntax, declaration: some DeclGroupSyntax) {
        self.node = node
        self.declaration = declaration
    }

    private mutating func error(_ at: some SyntaxProtocol, _ message: ModelDiagnostic) {
        diagnostics.append(Diagnostic(node: Syntax(at), message: message))
    }

    mutating func analyze() -> ModelAnalysis? {
        let typeName: String
        let isClass: Bool
        if let decl = declaration.as(StructDeclSyntax.self) {
            typeName = decl.name.text
            isClass = false
        } else if let decl = declaration.as(ClassDeclSyntax.self), decl.modifiers.contains(where: { $0.name.tokenKind == .keyword(.final) }) {
            typeName = decl.name.text
            isClass = true
        } else {
            let kind: String
            if declaration.is(EnumDeclSyntax.self) { kind = "an enum" }
            else if declaration.is(ProtocolDeclSyntax.self) { kind = "a protocol" }
            else if declaration.is(ActorDeclSyntax.self) { kind = "an actor" }
            else if declaration.is(ClassDeclSyntax.self) { kind = "a class that is not final" }
            else { kind = "an extension" }
            error(node, .notAStructOrFinalClass(kind: kind))
            return nil
        }

        var access = ""
        for modifier in declaration.modifiers {
            switch modifier.name.tokenKind {
            case .keyword(.public), .keyword(.open): access = "public "
            case .keyword(.package): access = "package "
            default: break
            }
        }

        let arguments = parseArguments()
        let (id, fields, transient) = properties(typeName: typeName, isClass: isClass)
        let uniqueLists = resolve(arguments.unique, label: "unique", fields: fields, id: id, transient: transient)
        let indexLists = resolve(arguments.indexes, label: "indexes", fields: fields, id: id, transient: transient)
        guard diagnostics.isEmpty, let id else { return nil }
        return ModelAnalysis(
            typeName: typeName, isClass: isClass, access: access, id: id, fields: fields, collection: arguments.collection,
            uniqueConstraints: fields.filter(\.unique).map { [$0.storedName] } + uniqueLists,
            indexes: fields.filter(\.indexed).map { [$0.storedName] } + indexLists
        )
    }

    // MARK: The macro's arguments

    private struct Arguments {
        var collection: String?
        var unique: [[(String, ExprSyntax)]] = []
        var indexes: [[(String, ExprSyntax)]] = []
    }

    private mutating func parseArguments() -> Arguments {
        var result = Arguments()
        guard case .argumentList(let list) = node.arguments else { return result }
        for argument in list {
            switch argument.label?.text {
            case "collection":
                if argument.expression.is(NilLiteralExprSyntax.self) { continue }
                guard let name = stringLiteral(argument.expression) else {
                    error(argument.expression, .notALiteral(argument: "collection"))
                    continue
                }
                if !ModelNames.isValidCollectionName(name) { error(argument.expression, .invalidCollectionName(name: name)) }
                result.collection = name
            case let label?:
                let lists = fieldLists(argument.expression, label: label)
                if label == "unique" { result.unique = lists } else { result.indexes = lists }
            case nil:
                break
            }
        }
        return result
    }

    private mutating func fieldLists(_ expression: ExprSyntax, label: String) -> [[(String, ExprSyntax)]] {
        guard let outer = expression.as(ArrayExprSyntax.self) else {
            error(expression, .notALiteral(argument: label))
            return []
        }
        var lists: [[(String, ExprSyntax)]] = []
        for element in outer.elements {
            guard let inner = element.expression.as(ArrayExprSyntax.self) else {
                error(element.expression, .notALiteral(argument: label))
                continue
            }
            if inner.elements.isEmpty { error(inner, .emptyFieldList(argument: label)) }
            var names: [(String, ExprSyntax)] = []
            for name in inner.elements {
                guard let text = stringLiteral(name.expression) else {
                    error(name.expression, .notALiteral(argument: label))
                    continue
                }
                names.append((text, name.expression))
            }
            lists.append(names)
        }
        return lists
    }

    /// Property names in the type's lists, checked and turned into stored names.
    private mutating func resolve(
        _ lists: [[(String, ExprSyntax)]], label: String, fields: [ModelAnalysis.Field], id: ModelAnalysis.ID?, transient: Set<String>
    ) -> [[String]] {
        var result: [[String]] = []
        for list in lists {
            var stored: [String] = []
            var seen = Set<String>()
            for (name, expression) in list {
                if !seen.insert(name).inserted {
                    error(expression, .repeatedField(name: name, argument: label))
                    continue
                }
                if let field = fields.first(where: { $0.name == name }) {
                    stored.append(field.storedName)
                } else if id.map({ unquoted($0.property) == name }) ?? false {
                    error(expression, .notAField(name: name, argument: label, reason: "is the id, the record id and not a field"))
                } else if transient.contains(name) {
                    error(expression, .notAField(name: name, argument: label, reason: "is @Transient and not stored"))
                } else {
                    error(expression, .unknownField(name: name, argument: label))
                }
            }
            result.append(stored)
        }
        return result
    }

    // MARK: Properties

    private mutating func properties(typeName: String, isClass: Bool) -> (ModelAnalysis.ID?, [ModelAnalysis.Field], Set<String>) {
        var markedID: (ModelAnalysis.ID, TokenSyntax)?
        var namedID: (ModelAnalysis.ID, PropertyMarks, PatternBindingSyntax)?
        var candidates: [(ModelAnalysis.Field, PropertyMarks, PatternBindingSyntax)] = []
        var transient = Set<String>()

        for member in declaration.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            let marks = collectMarks(variable.attributes)
            let isStatic = variable.modifiers.contains { [.keyword(.static), .keyword(.class)].contains($0.name.tokenKind) }
            let isLazy = variable.modifiers.contains { $0.name.tokenKind == .keyword(.lazy) }
            let isLet = variable.bindingSpecifier.tokenKind == .keyword(.let)
            for binding in variable.bindings {
                guard let pattern = binding.pattern.as(IdentifierPatternSyntax.self) else {
                    if !isStatic { error(binding.pattern, .unsupportedPattern) }
                    continue
                }
                let property = pattern.identifier.text
                let name = unquoted(property)
                if isStatic || isComputed(binding) {
                    for attribute in marks.order {
                        error(marks.found[attribute] ?? node, isStatic ? .attributeOnStatic(attribute: attribute.rawValue, property: name) : .attributeOnComputed(attribute: attribute.rawValue, property: name))
                    }
                    continue
                }
                if marks.has(.transient) {
                    transient.insert(name)
                    if binding.initializer == nil { error(pattern, .transientWithoutValue(property: name)) }
                    for attribute in marks.order where attribute != .transient {
                        error(marks.found[attribute] ?? node, .transientConflict(attribute: attribute.rawValue, property: name))
                    }
                    continue
                }
                if isLazy {
                    error(pattern, .lazyProperty(property: name))
                    continue
                }
                if isLet && binding.initializer != nil {
                    error(pattern, .letWithValue(property: name))
                    continue
                }
                guard let type = binding.typeAnnotation?.type else {
                    error(pattern, .missingType(property: name))
                    continue
                }
                if marks.has(.id) {
                    let id = ModelAnalysis.ID(property: property, type: type.trimmedDescription, isMutable: !isLet)
                    if let (first, _) = markedID {
                        error(pattern, .twoIDs(first: unquoted(first.property), second: name))
                    } else {
                        markedID = (id, pattern.identifier)
                        checkID(id, marks: marks, binding: binding, type: type)
                    }
                    continue
                }
                if name == "id" {
                    namedID = (ModelAnalysis.ID(property: property, type: type.trimmedDescription, isMutable: !isLet), marks, binding)
                }
                let (decodedType, isOptional) = decodedType(of: type)
                var storedName = name
                if marks.has(.stored) {
                    if let expression = marks.argument(.stored), let text = stringLiteral(expression) {
                        storedName = text
                    } else {
                        error(marks.found[.stored] ?? node, .notALiteral(argument: "@Stored's name"))
                    }
                }
                let field = ModelAnalysis.Field(
                    property: property, name: name, storedName: storedName, decodedType: decodedType, isOptional: isOptional,
                    transform: marks.argument(.transform), defaultValue: marks.argument(.default),
                    unique: marks.has(.unique), indexed: marks.has(.indexed))
                candidates.append((field, marks, binding))
            }
        }

        // The id: the property marked @ID, else the one named `id`.
        var id: ModelAnalysis.ID?
        if let (marked, _) = markedID {
            id = marked
        } else if let (named, marks, binding) = namedID {
            id = named
            candidates.removeAll { $0.0.name == "id" }
            if let type = binding.typeAnnotation?.type { checkID(named, marks: marks, binding: binding, type: type) }
        } else {
            error(declarationName ?? Syntax(node), .noID(type: typeName))
        }

        var fields: [ModelAnalysis.Field] = []
        var byStoredName: [String: String] = [:]
        for (field, marks, binding) in candidates {
            let at = marks.found[.stored].map(Syntax.init) ?? Syntax(binding.pattern)
            if !ModelNames.isValidFieldName(field.storedName) {
                error(at, .invalidStoredName(name: field.storedName, property: field.name))
            } else if let first = byStoredName[field.storedName] {
                error(at, .duplicateStoredName(name: field.storedName, first: first, second: field.name))
            } else {
                byStoredName[field.storedName] = field.name
            }
            fields.append(field)
        }
        return (id, fields, transient)
    }

    private var declarationName: Syntax? {
        if let decl = declaration.as(StructDeclSyntax.self) { return Syntax(decl.name) }
        if let decl = declaration.as(ClassDeclSyntax.self) { return Syntax(decl.name) }
        return nil
    }

    private mutating func checkID(_ id: ModelAnalysis.ID, marks: PropertyMarks, binding: PatternBindingSyntax, type: TypeSyntax) {
        for attribute in marks.order where attribute != .id {
            error(marks.found[attribute] ?? node, .attributeOnID(attribute: attribute.rawValue))
        }
        let (wrapped, isOptional) = decodedType(of: type)
        let base = ModelNames.withoutModule(wrapped)
        let integers: Set<String> = ["Int", "Int64"]
        let plain: Set<String> = ["Int", "Int64", "String", "UUID"]
        if isOptional ? !integers.contains(base) : !plain.contains(base) {
            error(type, .unsupportedIDType(property: unquoted(id.property), type: type.trimmedDescription))
        } else if isOptional && !id.isMutable {
            error(binding.pattern, .assignedIDLet(property: unquoted(id.property)))
        }
    }

    private mutating func collectMarks(_ attributes: AttributeListSyntax) -> PropertyMarks {
        var marks = PropertyMarks()
        for element in attributes {
            guard case .attribute(let attribute) = element else { continue }
            let written = attribute.attributeName.trimmedDescription
            let name = written.split(separator: ".").last.map(String.init) ?? written
            guard let kind = PropertyAttribute(rawValue: name) else { continue }
            if marks.found[kind] != nil {
                error(attribute, .duplicateAttribute(attribute: kind.rawValue, property: "this property"))
                continue
            }
            marks.found[kind] = attribute
            marks.order.append(kind)
        }
        return marks
    }

    private func isComputed(_ binding: PatternBindingSyntax) -> Bool {
        guard let block = binding.accessorBlock else { return false }
        switch block.accessors {
        case .getter:
            return true
        case .accessors(let list):
            return list.contains { ![.keyword(.willSet), .keyword(.didSet)].contains($0.accessorSpecifier.tokenKind) }
        }
    }

    /// The type to decode and whether the property is optional: `T?`, `T!` and `Optional<T>`
    /// are written as optionals; an optional behind a type alias is not seen (and decodes
    /// through the fallback, which reads a missing field as `nil` too).
    private func decodedType(of type: TypeSyntax) -> (String, Bool) {
        if let optional = type.as(OptionalTypeSyntax.self) { return (expressionType(optional.wrappedType), true) }
        if let optional = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) { return (expressionType(optional.wrappedType), true) }
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.name.text == "Optional",
            let arguments = identifier.genericArgumentClause?.arguments, arguments.count == 1, let first = arguments.first
        {
            return ("(" + first.argument.trimmedDescription + ")", true)
        }
        return (expressionType(type), false)
    }

    /// A type as written, parenthesized where `.self` would not parse after it.
    private func expressionType(_ type: TypeSyntax) -> String {
        if type.is(SomeOrAnyTypeSyntax.self) || type.is(CompositionTypeSyntax.self) || type.is(FunctionTypeSyntax.self) {
            return "(" + type.trimmedDescription + ")"
        }
        return type.trimmedDescription
    }

    private func stringLiteral(_ expression: ExprSyntax) -> String? {
        guard let literal = expression.as(StringLiteralExprSyntax.self), literal.segments.count == 1,
            case .stringSegment(let segment) = literal.segments.first
        else { return nil }
        return segment.content.text
    }
}

/// A property name without the backticks of an escaped keyword.
func unquoted(_ name: String) -> String {
    name.hasPrefix("`") && name.hasSuffix("`") && name.count >= 2 ? String(name.dropFirst().dropLast()) : name
}

/// DepotCore's name rules, mirrored at compile time (`FieldName`, `CollectionName` in
/// Names.swift; Docs/Models.md).
enum ModelNames {
    static func isLetter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) }
    static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// `[A-Za-z_][A-Za-z0-9_]{0,62}`, not `id`, not starting with `_depot`.
    static func isValidFieldName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 63, isLetter(first) || first == 0x5F else { return false }
        guard bytes.allSatisfy({ isLetter($0) || isDigit($0) || $0 == 0x5F }) else { return false }
        return name != "id" && !name.hasPrefix("_depot")
    }

    /// `[A-Za-z][A-Za-z0-9_]{0,62}`.
    static func isValidCollectionName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 63, isLetter(first) else { return false }
        return bytes.allSatisfy { isLetter($0) || isDigit($0) || $0 == 0x5F }
    }

    /// `Swift.Int` → `Int`, `Foundation.UUID` → `UUID`.
    static func withoutModule(_ type: String) -> String {
        var type = type
        while type.hasPrefix("(") && type.hasSuffix(")") { type = String(type.dropFirst().dropLast()) }
        for prefix in ["Swift.", "Foundation."] where type.hasPrefix(prefix) { return String(type.dropFirst(prefix.count)) }
        return type
    }
}
