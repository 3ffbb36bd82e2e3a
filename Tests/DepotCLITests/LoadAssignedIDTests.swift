import Depot
import Foundation
import Testing

@Suite("depot load: records without an id")
struct LoadAssignedIDTests {
    @Test("records without an id get store-assigned integer ids; a string-id collection refuses them naming the line")
    func recordsWithoutID() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for scheme in ["memory"] + (try await CLI.persistentSchemes()) {
            let store = scheme == "memory" ? "memory:" : directory.storeString(scheme, "ids")
            let input = "{\"title\":\"a\"}\n{\"id\":7,\"title\":\"b\"}\n{\"title\":\"c\",\"n\":[1,2]}\n"
            let load = try await CLI.run(["load", store, "books"], stdin: input)
            #expect(load.status == 0, "\(scheme): \(load)")
            if scheme == "memory" { continue }
            let dump = try await CLI.run(["dump", store, "books"])
            let objects = try dump.lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\(scheme): \($0)") }
            #expect(objects.count == 3, "\(scheme): \(dump)")
            let ids = objects.compactMap { $0["id"] as? Int }
            #expect(ids.count == 3 && Set(ids).count == 3 && ids.contains(7), "\(scheme): \(dump)")
            #expect(Set(objects.compactMap { $0["title"] as? String }) == ["a", "b", "c"], "\(scheme): \(dump)")

            let strings = try await CLI.run(["load", store, "people"], stdin: "{\"id\":\"ada\",\"born\":1815}\n")
            #expect(strings.status == 0, "\(scheme): \(strings)")
            let refused = try await CLI.run(["load", store, "people"], stdin: "{\"id\":\"alan\"}\n\n{\"born\":1912}\n")
            #expect(refused.status == 1, "\(scheme): a bad line, not a usage error: \(refused)")
            #expect(refused.stderr.contains("line 3") && refused.stderr.contains("string ids") && refused.stderr.contains("nothing was committed"), "\(scheme): \(refused)")
            let count = try await CLI.run(["count", store, "people"])
            #expect(count.stdout == "1\n", "\(scheme): the refused batch committed nothing: \(count)")
        }
    }
}
