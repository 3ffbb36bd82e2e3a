import DepotCore
import Foundation
import NIOCore
import PostgresNIO
import Synchronization

/// Change events across processes through LISTEN/NOTIFY (Docs/PostgresDriver.md, "Change
/// events across processes"): each committed write transaction that changed records sends
/// `pg_notify` inside the transaction (so only commits are heard), and every store on the
/// same schema listens on one dedicated connection and publishes what other drivers
/// committed to ``Store/changes()`` and the store's read caches.
///
/// A listening driver registers in the schema's listeners table, and a write notifies only
/// when a driver other than its own is registered (``heardElsewhere(_:)``): a store that is
/// the only one on its schema does not pay for hearing, and throwing away, its own writes.
final class PostgresChangeFeed: @unchecked Sendable {
    // @unchecked: `stores` and `task` are guarded by `lock`; the rest is immutable.
    /// This driver's mark in its notifications, so that it ignores its own.
    let origin = UUID().uuidString
    /// The channel: one per schema (notifications are already per database).
    let channel: String
    private let pool: PGPool
    private let lock = NSLock()
    private var stores: [WeakStore] = []
    private var task: Task<Void, Never>?
    /// Set once the first LISTEN has succeeded (tests wait for it).
    let listening = Atomic<Bool>(false)
    /// Depot notifications heard, this driver's own included (for tests).
    let heard = Atomic<Int>(0)
    /// Connections opened whose LISTEN or registration then failed (for tests).
    let failedAttempts = Atomic<Int>(0)

    struct WeakStore {
        weak var store: Store?
    }

    /// The most bytes of one notification's payload (the server's limit is 8000).
    static let payloadLimit = 7000

    /// The listeners table, schema-qualified and quoted.
    private let listeners: String

    init(pool: PGPool, schema: String) {
        self.pool = pool
        listeners = PostgresSQL.quote(schema) + "." + PostgresSQL.quote(PostgresSQL.listenersTable)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in schema.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        channel = "depot_changes_" + String(hash, radix: 16)
    }

    /// Starts delivering other processes' commits to `store`.
    func attach(_ store: Store) {
        lock.withLock {
            stores.removeAll { $0.store == nil }
            stores.append(WeakStore(store: store))
            if task == nil { task = Task.detached { [self] in await listen() } }
        }
    }

    func stop() {
        let running = lock.withLock { () -> Task<Void, Never>? in
            defer { task = nil }
            return task
        }
        running?.cancel()
    }

    private func listen() async {
        while !Task.isCancelled {
            if let connection = try? await pool.connectDedicated() {  // the server is away: try again below
                do {
                    try await listen(on: connection)
                } catch {
                    // LISTEN or the registration failed (the listeners table gone, the session
                    // ended mid-statement): the connection is closed before it is let go, and
                    // the loop opens another.
                    failedAttempts.add(1, ordering: .relaxed)
                    _ = try? await connection.close().get()  // closing a failed connection: nothing to report to
                }
            }
            // Notifications sent while no connection listens are lost (Docs/PostgresDriver.md says so).
            if Task.isCancelled { return }
            try? await Task.sleep(for: .milliseconds(500))  // cancelled: the loop condition ends it
        }
    }

    /// Subscribes on `connection`, registers, and returns when the connection ends or the
    /// task is cancelled (then unregistering and closing it without waiting).
    /// - Throws: when LISTEN or the registration fails; `connection` is then still the
    ///   caller's to close.
    private func listen(on connection: PostgresConnection) async throws {
        let context = connection.addListener(channel: channel) { [weak self] _, message in
            self?.deliver(message.payload)
        }
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: "LISTEN " + PostgresSQL.quote(channel)), logger: pool.logger).get()
            // Registered after LISTEN: a write that sees the registration is heard. Rows
            // of listeners whose server session is gone (a process killed) are dropped.
            _ = try await connection.query(PostgresQuery(unsafeSQL: "DELETE FROM \(listeners) WHERE pid NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL)"), logger: pool.logger).get()
            _ = try await connection.query(register, logger: pool.logger).get()
        } catch {
            context.stop()
            throw error
        }
        listening.store(true, ordering: .releasing)
        let unregister = self.unregister
        let logger = pool.logger
        await withTaskCancellationHandler {
            _ = try? await connection.closeFuture.get()  // ends when the connection does, whatever the reason
        } onCancel: {
            context.stop()
            // Cancelled: nobody waits. A row left behind (the close came first) only makes
            // writers notify until the next listener to start drops it. The connection is
            // held until it has closed (a connection let go open is a leak; debug builds
            // of postgres-nio stop on it).
            connection.query(unregister, logger: logger).whenComplete { _ in
                connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
            }
        }
    }

    /// Registers this driver's listener under its server session's pid.
    private var register: PostgresQuery {
        var query = PostgresQuery(unsafeSQL: "INSERT INTO \(listeners) (origin, pid) VALUES ($1, pg_backend_pid()) ON CONFLICT (origin) DO UPDATE SET pid = EXCLUDED.pid, since = now()")
        query.binds.append(origin)
        return query
    }

    /// Removes this driver's registration.
    private var unregister: PostgresQuery {
        var query = PostgresQuery(unsafeSQL: "DELETE FROM \(listeners) WHERE origin = $1")
        query.binds.append(origin)
        return query
    }

    /// The SQL condition under which a write notifies: a listener other than this driver's
    /// is registered (`origin` bound through `sql`). Evaluated once per statement.
    func heardElsewhere(_ sql: SQLBuilder) -> String {
        "EXISTS (SELECT 1 FROM \(listeners) WHERE origin <> \(sql.text(origin)))"
    }

    private func deliver(_ payload: String) {
        guard let value = try? JSONText.parse(payload),  // not Depot's: another program on the channel
            case .object(let object) = value, case .string(let from)? = object["o"]
        else { return }
        heard.add(1, ordering: .relaxed)
        guard from != origin, case .array(let items)? = object["c"] else { return }
        var events: [ChangeEvent] = []
        for item in items {
            guard case .array(let parts) = item, parts.count == 3, case .string(let collection) = parts[0], case .string(let kind) = parts[1],
                let name = try? CollectionName(validating: collection), let kind = ChangeEvent.Kind(rawValue: kind), let id = RecordID(parts[2])
            else { continue }
            events.append(ChangeEvent(collection: name, kind: kind, id: id))
        }
        guard !events.isEmpty else { return }
        let batch = ChangeBatch(changes: events)
        let live = lock.withLock { stores.compactMap(\.store) }
        for store in live { store.publish(batch) }
    }

    /// The payloads announcing `events`, each under the server's size limit.
    func payloads(_ events: [ChangeEvent]) -> [String] {
        var out: [String] = []
        var current: [FieldValue] = []
        var size = 0
        func flush() {
            guard !current.isEmpty else { return }
            out.append(JSONText.serialize(.object(["o": .string(origin), "c": .array(current)])))
            current.removeAll()
            size = 0
        }
        for event in events {
            let item = FieldValue.array([.string(event.collection.rawValue), .string(event.kind.rawValue), event.id.fieldValue])
            let itemSize = JSONText.serialize(item).utf8.count + 1
            if size + itemSize > Self.payloadLimit - 80 { flush() }
            current.append(item)
            size += itemSize
        }
        flush()
        return out
    }
}
