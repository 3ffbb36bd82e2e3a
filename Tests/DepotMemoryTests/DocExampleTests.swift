import Foundation
import Testing

/// Every ```swift block of README.md and of the Markdown files under Docs/ and Examples/ is
/// either compiled by a test target, or marked as a fragment and listed as skipped, with its
/// file and line, on every run.
///
/// A compiled block lives in a test source between a `// example: FILE #N` line (N counts the
/// file's swift blocks from 1) and a `// end of example` line; its lines, less those ending in
/// `// scaffold` (the wrapping the compiler needs), must be the block's lines exactly.
///
/// A fragment has a `<!-- fragment: REASON -->` line right before it. A fragment whose reason
/// is `declared in PATH` shows a declaration of the package's own sources: its lines must
/// appear in that file, in order and together, once the file's doc comments and blank lines
/// are left out.
@Suite struct DocExampleTests {
    /// The package's root folder, from this file's path (Tests/DepotMemoryTests/...).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A swift block of a document.
    struct Block {
        var name: String
        /// `FILE:LINE` of the block's opening fence.
        var place: String
        var lines: [String]
        /// The text after `fragment` in the marker line, `nil` for a block that is not one.
        var fragmentReason: String?
        var fragment: Bool { fragmentReason != nil }
    }

    /// README.md and every Markdown file under Docs/ and Examples/, relative to the root.
    static func documents() throws -> [String] {
        var found = ["README.md"]
        for folder in ["Docs", "Examples"] {
            guard let walker = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path) else {
                throw ExampleError("cannot list \(folder)")
            }
            for case let relative as String in walker where relative.hasSuffix(".md") {
                found.append(folder + "/" + relative)
            }
        }
        return found.sorted()
    }

    static func blocks(in relativePath: String) throws -> [Block] {
        let text = try String(contentsOf: root.appendingPathComponent(relativePath), encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        var blocks: [Block] = []
        var index = 0
        while index < lines.count {
            if lines[index].hasPrefix("```swift") {
                let marker = index > 0 && lines[index - 1].hasPrefix("<!-- fragment") ? lines[index - 1] : nil
                let reason = marker.map {
                    $0.dropFirst("<!-- fragment".count).replacingOccurrences(of: "-->", with: "")
                        .trimmingCharacters(in: CharacterSet(charactersIn: ": ")).trimmingCharacters(in: .whitespaces)
                }
                let place = "\(relativePath):\(index + 1)"
                var body: [String] = []
                index += 1
                while index < lines.count, !lines[index].hasPrefix("```") {
                    body.append(lines[index])
                    index += 1
                }
                blocks.append(Block(name: "\(relativePath) #\(blocks.count + 1)", place: place, lines: body, fragmentReason: reason))
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

    /// `true` when `block` appears, in order and together, in the source file at `path`
    /// (relative to the root) with its doc comments and blank lines left out.
    static func declares(_ path: String, _ block: [String]) throws -> Bool {
        let source = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8).components(separatedBy: "\n")
            .filter { line in
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                return !trimmed.isEmpty && !trimmed.hasPrefix("///")
            }
        let wanted = block.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        guard !wanted.isEmpty, source.count >= wanted.count else { return false }
        return (0...(source.count - wanted.count)).contains { Array(source[$0..<($0 + wanted.count)]) == wanted }
    }

    @Test("README.md's, Docs/'s and Examples/' swift blocks are compiled by a test target or marked as fragments, which are listed")
    func everyBlockIsCompiledOrAFragment() throws {
        let blocks = try Self.documents().flatMap(Self.blocks)
        let examples = try Self.compiledExamples()
        #expect(blocks.filter { $0.name.hasPrefix("README.md") }.count >= 3)
        var skipped: [String] = []
        for block in blocks {
            if let reason = block.fragmentReason {
                #expect(!reason.isEmpty, "\(block.place): a fragment says why it is one: <!-- fragment: REASON -->")
                #expect(examples[block.name] == nil, "\(block.name) is marked as a fragment but also compiled")
                if reason.hasPrefix("declared in ") {
                    let path = String(reason.dropFirst("declared in ".count))
                    #expect(try Self.declares(path, block.lines), "\(block.place): the block is not the declaration in \(path)")
                }
                skipped.append("\(block.place) (\(reason))")
                continue
            }
            guard let compiled = examples[block.name] else {
                Issue.record("\(block.place) (\(block.name)) is neither compiled by a test (// example: \(block.name)) nor marked <!-- fragment: REASON -->")
                continue
            }
            #expect(compiled == block.lines, "\(block.place) (\(block.name)) differs from its compiled copy")
        }
        for name in examples.keys.sorted() where !blocks.contains(where: { $0.name == name }) {
            Issue.record("a test marks '// example: \(name)', which is no swift block")
        }
        // Listed on every run, so that what is not compiled stays visible.
        print("DocExampleTests: \(blocks.count) swift blocks, \(blocks.count - skipped.count) compiled, \(skipped.count) skipped as fragments\(skipped.isEmpty ? "" : ": " + skipped.joined(separator: "; "))")
    }
}

struct ExampleError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
