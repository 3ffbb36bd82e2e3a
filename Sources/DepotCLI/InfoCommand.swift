import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot info [STORE] [--json]`: what a store is and holds.
struct InfoCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show a store's driver, capabilities, collections, constraints, indexes, schema version and sync state.",
        usage: "depot info [STORE] [--json]",
        discussion: """
            --json prints one JSON object instead:
              {"store":"sqlite:app.db","driver":"sqlite","capabilities":[...],"schemaVersion":0,
               "collections":[{"name":"books","idKind":"int","count":12,
                 "unique":[{"name":"isbn_unique","fields":["isbn"]}],
                 "indexes":[{"name":"author_idx","fields":["author"]}]}],
               "sync":[{"collection":"books","attachment":{...}}],
               "outbox":{"total":0,"pending":0}}

            Examples:
              depot info sqlite:app.db
              DEPOT_STORE=json:data.json depot info --json | jq .collections
            """
    )

    @Argument(help: ArgumentHelp("[STORE]", valueName: "store"))
    var arguments: [String] = []

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    @OptionGroup var global: GlobalOptions

    /// What `info` reports about one collection.
    struct CollectionInfo: Sendable {
        var schema: CollectionSchema
        var count: Int
    }

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, _) = try StoreArguments.split(arguments, stores: 1, rest: 0...0, usage: "depot info [STORE] [--json]")
        let store = try await StoreArguments.open(stores[0], context, mustExist: true)
        return try await StoreArguments.using(store) { store in
            let names = try await store.collectionNames()
            var collections: [CollectionInfo] = []
            for name in names {
                let target = store.collection(name)
                guard let schema = try await target.schema() else { continue }
                collections.append(CollectionInfo(schema: schema, count: try await target.count()))
            }
            let version = try await store.schemaVersion()
            let attachments = try await store.collection(try CollectionName(reserved: "_depot_sync")).query()
            let outbox = store.collection(try CollectionName(reserved: "_depot_outbox"))
            let outboxTotal = try await outbox.count()
            let outboxPending = try await outbox.count(.equal("state", "pending"))
            let driver = store.driver
            if json {
                let object: FieldValue = .object([
                    "store": .string(store.name),
                    "driver": .string(driver.backendName),
                    "capabilities": .array(Self.capabilityNames(driver.capabilities).map { .string($0) }),
                    "schemaVersion": .int(Int64(version)),
                    "collections": .array(collections.map(Self.json)),
                    "sync": .array(attachments.map { .object(["collection": $0.id.fieldValue, "attachment": .object($0.fields)]) }),
                    "outbox": .object(["total": .int(Int64(outboxTotal)), "pending": .int(Int64(outboxPending))]),
                ])
                Console.print(JSONText.serialize(object))
                return ExitStatus.success
            }
            let persistent = driver.capabilities.contains(.persistence)
            Console.print("store:          \(store.name)")
            Console.print("driver:         \(driver.backendName)\(persistent ? "" : " (not persistent: gone when the process exits)")")
            Console.print("capabilities:   \(Self.capabilityNames(driver.capabilities).joined(separator: ", "))")
            Console.print("schema version: \(version)")
            Console.print("collections:    \(collections.count)")
            if !collections.isEmpty {
                let width = max(4, collections.map { $0.schema.name.rawValue.count }.max() ?? 4)
                let countWidth = max(7, collections.map { String($0.count).count }.max() ?? 7)
                Console.print("  " + "name".padding(width) + "  " + "records".leftPadding(countWidth) + "  id      unique / indexes")
                for info in collections {
                    let unique = info.schema.uniqueConstraints.map { "unique \($0.name)(\($0.fields.joined(separator: ",")))" }
                    let indexes = info.schema.indexes.map { "index \($0.name)(\($0.fields.joined(separator: ",")))" }
                    let extras = (unique + indexes).joined(separator: "; ")
                    Console.print("  " + info.schema.name.rawValue.padding(width) + "  " + String(info.count).leftPadding(countWidth)
                        + "  " + info.schema.idKind.rawValue.padding(6) + "  " + (extras.isEmpty ? "-" : extras))
                }
            }
            if attachments.isEmpty {
                Console.print("sync:           no collection is attached to a remote")
            } else {
                Console.print("sync:           \(attachments.count) attached collection(s)")
                for attachment in attachments {
                    Console.print("  \(attachment.id.fieldValue.stringValue ?? attachment.id.description): \(JSONText.serialize(.object(attachment.fields)))")
                }
            }
            Console.print("outbox:         \(outboxTotal) entr\(outboxTotal == 1 ? "y" : "ies") (\(outboxPending) pending)")
            return ExitStatus.success
        }
    }

    static func json(_ info: CollectionInfo) -> FieldValue {
        .object([
            "name": .string(info.schema.name.rawValue),
            "idKind": .string(info.schema.idKind.rawValue),
            "count": .int(Int64(info.count)),
            "unique": .array(info.schema.uniqueConstraints.map { .object(["name": .string($0.name), "fields": .array($0.fields.map { .string($0) })]) }),
            "indexes": .array(info.schema.indexes.map { .object(["name": .string($0.name), "fields": .array($0.fields.map { .string($0) })]) }),
        ])
    }

    /// The names of the capabilities a driver has, in a stable order.
    static func capabilityNames(_ capabilities: DriverCapabilities) -> [String] {
        capabilities.description.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

extension String {
    /// The text padded with spaces on the right to `width` characters.
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    /// The text padded with spaces on the left to `width` characters.
    func leftPadding(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
