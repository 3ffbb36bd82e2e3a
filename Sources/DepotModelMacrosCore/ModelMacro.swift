import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// `@Model`: writes a type's `StoredModel` conformance (Docs/Models.md).
///
/// The extension role writes every requirement; for a struct `init(record:)` goes in the
/// extension too, so the memberwise initializer survives. A class extension cannot add a
/// designated initializer, so for a final class the member role writes `init(record:)`.
/// Diagnostics come from the extension role only, so each is reported once.
public struct ModelMacro: ExtensionMacro, MemberMacro {
    /// The extension with every `StoredModel` requirement, or none and the diagnostics when
    /// the declaration breaks a rule.
    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        var analyzer = ModelAnalyzer(node: node, declaration: declaration)
        let analysis = analyzer.analyze()
        for diagnostic in analyzer.diagnostics { context.diagnose(diagnostic) }
        guard let analysis else { return [] }
        let conformance = protocols.isEmpty ? "" : ": DepotCore.StoredModel"
        let source = "extension \(type.trimmedDescription)\(conformance) {\n" + extensionMembers(analysis) + "}"
        return [try ExtensionDeclSyntax("\(raw: source)")]
    }

    /// A final class's `init(record:)` (nothing for a struct or a refused declaration).
    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        var analyzer = ModelAnalyzer(node: node, declaration: declaration)
        guard let analysis = analyzer.analyze(), analysis.isClass else { return [] }
        return [DeclSyntax(stringLiteral: initializer(analysis))]
    }

    /// The requirements, as source text (one member after another, indented by four).
    static func extensionMembers(_ model: ModelAnalysis) -> String {
        let access = model.access
        var text = "    \(access)typealias ID = \(model.id.type)\n"
        if let collection = model.collection {
            text += "    \(access)static var collectionName: String {\n        \(quoted(collection))\n    }\n"
        }
        if !model.uniqueConstraints.isEmpty {
            let list = model.uniqueConstraints.map { "DepotCore.UniqueConstraint([\($0.map(quoted).joined(separator: ", "))])" }
            text += "    \(access)static var uniqueConstraints: [DepotCore.UniqueConstraint] {\n        [\(list.joined(separator: ", "))]\n    }\n"
        }
        if !model.indexes.isEmpty {
            let list = model.indexes.map { "DepotCore.IndexDefinition([\($0.map(quoted).joined(separator: ", "))])" }
            text += "    \(access)static var indexes: [DepotCore.IndexDefinition] {\n        [\(list.joined(separator: ", "))]\n    }\n"
        }
        let id = "self.\(model.id.property)"
        text += "    \(access)var storedRecordID: DepotCore.RecordID? {\n        \(id).recordID\n    }\n"
        text += "    \(access)func encodeRecord(into sink: any DepotCore.FieldSink) throws -> DepotCore.RecordID? {\n"
        for field in model.fields {
            let name = quoted(field.storedName)
            let with = field.transform.map { ", with: \($0.trimmedDescription)" } ?? ""
            text += "        try sink.set(DepotCore.ModelCoding.encode(self.\(field.property), field: \(name)\(with)), forField: \(name))\n"
        }
        text += "        return \(id).recordID\n    }\n"
        if !model.isClass { text += initializer(model).split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }.joined(separator: "\n") + "\n" }
        text += "    \(access)func assigningID(_ id: DepotCore.RecordID) throws -> Self {\n"
        if model.isClass || !model.id.isMutable {
            text += "        try DepotCore.ModelCoding.copy(of: self, withID: id)\n"
        } else {
            text += "        var copy = self\n        copy.\(model.id.property) = try ID(recordID: id)\n        return copy\n"
        }
        text += "    }\n"
        return text
    }

    /// `init(record:)`: the id from the record id, then every field in declaration order.
    static func initializer(_ model: ModelAnalysis) -> String {
        var text = "\(model.access)init(record source: any DepotCore.FieldSource) throws {\n"
        text += "    self.\(model.id.property) = try ID(recordID: source.recordID)\n"
        for field in model.fields {
            let function = field.isOptional || field.defaultValue != nil ? "decodeIfPresent" : "decode"
            let with = field.transform.map { ", with: \($0.trimmedDescription)" } ?? ""
            let fallback = field.defaultValue.map { " ?? (\($0.trimmedDescription))" } ?? ""
            text += "    self.\(field.property) = try DepotCore.ModelCoding.\(function)(\(field.decodedType).self, from: source, field: \(quoted(field.storedName))\(with))\(fallback)\n"
        }
        text += "}"
        return text
    }

    /// A Swift string literal of `text` (names are ASCII identifiers; quotes and
    /// backslashes are escaped all the same).
    static func quoted(_ text: String) -> String {
        var literal = "\""
        for character in text {
            if character == "\\" || character == "\"" { literal.append("\\") }
            literal.append(character)
        }
        return literal + "\""
    }
}

/// `@ID`, `@Unique`, `@Indexed`, `@Transient`, `@Stored`, `@Transform`, `@Default`: marks
/// that `@Model` reads. They add nothing themselves.
public struct PropertyMarkerMacro: PeerMacro {
    /// Nothing: `@Model` reads the attributes where they are.
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}
