import Foundation
import SwiftSyntaxMacrosTestSupport
import XCTest

/// DepotConformance's `MacroShaped` (Sources/DepotConformance/ModelMacroChecks.swift) and
/// `depot bench`'s `GeneratedIntegerRecord` (Sources/DepotBench/BenchTypedModel.swift) are the
/// macro's expansion written out, because neither library may depend on the macro. This test expands the declaration in that file's MODEL INPUT comment with the real
/// macro and requires the MODEL EXPANSION region, exactly: change one, and it fails until
/// the other matches.
final class ConformanceExpansionTests: XCTestCase {
    /// The lines strictly between `// <name> BEGIN` and `// <name> END`.
    static func region(_ name: String, in text: String) throws -> [Substring] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let begin = try XCTUnwrap(lines.firstIndex { $0.trimmingCharacters(in: .whitespaces) == "// \(name) BEGIN" }, "no \(name) BEGIN")
        let end = try XCTUnwrap(lines.firstIndex { $0.trimmingCharacters(in: .whitespaces) == "// \(name) END" }, "no \(name) END")
        XCTAssertLessThan(begin, end)
        return Array(lines[(begin + 1)..<end])
    }

    /// Expands the MODEL INPUT of the file at `relativePath` and requires its MODEL EXPANSION.
    func checkExpansion(in relativePath: String, declaring typeName: String) throws {
        let path = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(relativePath)
        let text = try String(contentsOf: path, encoding: .utf8)
        let input = try Self.region("MODEL INPUT", in: text).map { line -> String in
            XCTAssertTrue(line.hasPrefix("// "), "every input line is a comment: \(line)")
            return String(line.dropFirst(3))
        }
        let expansion = try Self.region("MODEL EXPANSION", in: text).joined(separator: "\n")
        XCTAssertTrue(input.first?.hasPrefix("@Model(") ?? false)
        XCTAssertTrue(expansion.contains("extension \(typeName): DepotCore.StoredModel {"))
        expand(input.joined(separator: "\n"), expansion)
    }

    func testConformanceTypeIsTheMacroExpansion() throws {
        try checkExpansion(in: "Sources/DepotConformance/ModelMacroChecks.swift", declaring: "MacroShaped")
    }

    /// `depot bench`'s @Model side (Sources/DepotBench/BenchTypedModel.swift) is the
    /// macro's expansion too: the CLI may not depend on the macro either.
    func testBenchModelIsTheMacroExpansion() throws {
        try checkExpansion(in: "Sources/DepotBench/BenchTypedModel.swift", declaring: "GeneratedIntegerRecord")
    }
}
