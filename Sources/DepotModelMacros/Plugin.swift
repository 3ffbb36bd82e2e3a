import DepotModelMacrosCore
import SwiftCompilerPlugin
import SwiftSyntax
import SwiftSyntaxMacros

/// The compiler plugin holding DepotModel's macros. The implementations live in
/// DepotModelMacrosCore (a library the expansion tests link); the compiler finds a macro by
/// this module's name, so each is served under a type of this module that forwards to it.
@main
struct DepotModelPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [ModelMacro.self, PropertyMarkerMacro.self]
}

/// `@Model`: forwards to ``DepotModelMacrosCore/ModelMacro``.
public struct ModelMacro: ExtensionMacro, MemberMacro {
    /// The conformance extension (and the diagnostics).
    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        try DepotModelMacrosCore.ModelMacro.expansion(of: node, attachedTo: declaration, providingExtensionsOf: type, conformingTo: protocols, in: context)
    }

    /// A final class's `init(record:)`.
    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        try DepotModelMacrosCore.ModelMacro.expansion(of: node, providingMembersOf: declaration, conformingTo: protocols, in: context)
    }
}

/// The property attributes: forwards to ``DepotModelMacrosCore/PropertyMarkerMacro``.
public struct PropertyMarkerMacro: PeerMacro {
    /// Nothing: the attributes only mark properties.
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        try DepotModelMacrosCore.PropertyMarkerMacro.expansion(of: node, providingPeersOf: declaration, in: context)
    }
}
