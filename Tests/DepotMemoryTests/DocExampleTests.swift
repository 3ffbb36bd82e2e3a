import Foundation
import Testing

/// Every ```swift block of README.md and Docs/*.md is either compiled by a test target, or
/// marked as a fragment (a `<!-- fragment -->` line right before it) and listed here as skipped.
///
/// A compiled block lives in a test source between a `// example: FILE #N` line (N counts the
/// file's swift blocks from 1) and a `// end of example` line; its lines, less those ending in
/// `// scaffold` (the wrapping the compiler needs), must be the block's lines exactly.
@Suite struct DocExampleTests {
    /// The package's root folder, from this file's path (Tests/DepotMemoryTests/...).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A swift block of a document.
    struct Block {
        var name: String
        var lines: [String]
        var fragment: Bool
    }

    static func blocks(in relativePath: String) throws -> [Block] {
        let text = try String(contentsOf: root.appendingPathComponent(relativePath), encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        var blocks: [Block] = []
        var index = 0
        while index < lines.count {
            if lines[index].hasPrefix("```swift") {
                let fragment = index > 0 && lines[index - 1].hasPrefix("<!-- fragment")
                var body: [String] = []
                index += 1
                while index < lines.count, !lines[index].hasPrefix("```") {
                    body.append(lines[index])
                    index += 1
                }
                blocks.append(Block(name: "\(relativePath) #\(blocks.count + 1)", lines: body, fragment: fragment))
            }
            index += 1
        }
        return blocks
    }

    /// The examples marked in every Swift file under Tests/, by block name.
    static func compiledExamples() throws -> [String: [String]] {
        var examples: [String: [String]] = [:]
        let tests = root.appendingPathComponent("Tests")
        guard let walker = FileManager.default.enumerator(atPath: tests.path) else { throw ExampleError("cannot list \(tests.path)") }
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            let lines = try String(contentsOf: tests.appendingPathComponent(relative), encoding: .utf8).components(separatedBy: "\n")
            var current: (name: String, lines: [String])?
            for line in lines {
                if line.hasPrefix("// example: ") {
                    current = (String(line.dropFirst("// example: ".count)), [])
                } else if line == "// end of example", let done = current {
                    examples[done.name] = done.lines
                    current = nil
                } else if current != nil, !line.hasSuffix("// scaffold") {
                    current?.lines.append(line)
                }
            }
        }
        return examples
    }

    @Test("README.md and Docs/*.md swift blocks are compiled by a test target or marked as fragments")
    func everyBlockIsCompiledOrAFragment() throws {
        let docs = try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "Docs/" + $0 }
        let blocks = try (["README.md"] + docs).flatMap(Self.blocks)
        let examples = try Self.compiledExamples()
        #expect(blocks.filter { $0.name.hasPrefix("README.md") }.count >= 3)
        var skipped: [String] = []
        for block in blocks {
            if block.fragment {
                skipped.append(block.name)
                #expect(examples[block.name] == nil, "\(block.name) is marked as a fragment but also compiled")
                continue
            }
            guard let compiled = examples[block.name] else {
                Issue.record("\(block.name) is neither compiled by a test (// example: \(block.name)) nor marked <!-- fragment -->")
                continue
            }
            #expect(compiled == block.lines, "\(block.name) differs from its compiled copy")
        }
        for name in examples.keys.sorted() where !blocks.contains(where: { $0.name == name }) {
            Issue.record("a test marks '// example: \(name)', which is no swift block")
        }
        // Listed on every run, so that what is not compiled stays visible.
        print("DocExampleTests: \(blocks.count - skipped.count) swift blocks compiled; skipped as fragments: \(skipped.joined(separator: ", "))")
    }
}

struct ExampleError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
