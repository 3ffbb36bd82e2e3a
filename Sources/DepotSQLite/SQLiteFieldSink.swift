import CSQLite
import DepotCore

/// A record's fields bound straight to the collection's INSERT, UPDATE or upsert statement as
/// a model encodes them: no ``Record``, no dictionary and no copy of a value is made.
///
/// The three statements of a collection number their parameters alike (``CollectionMeta``:
/// `?1` the id, `?2` the type tags, `?3`… the columns), so a field's parameter is known before
/// the transaction knows which statement it will run. Each field finds its column through
/// ``FieldOrder`` (a model sends its fields in the same order for every record). A column the
/// record did not set is bound to NULL by ``complete(id:)``; a field the table has no column
/// for yet is only noted (``hasExtra``): the transaction then abandons the statement and
/// takes the record path, which adds the column.
///
/// One instance serves many records of one collection (``begin(_:)`` before each); it is
/// used only on the connection's thread and never re-entrantly, so the dynamic exclusivity
/// checks of its stored properties (a quarter of the cost of an insert) are turned off.
final class SQLiteFieldSink: DriverFieldSink {
    let meta: CollectionMeta
    /// The connection whose statements the sink binds; it outlives the transaction that
    /// owns the sink (not counted, like ``Statement/connection``).
    unowned(unsafe) let connection: SQLiteConnection
    /// The statement the current record is bound to, between ``begin(_:)`` and ``end()``:
    /// only its handle, so that no record retains and releases the statement's SQL text.
    @exclusivity(unchecked) private var handle: OpaquePointer?
    /// The current record's mark in ``stamps``.
    @exclusivity(unchecked) private var stamp: UInt32 = 0
    /// How many entries ``stamps`` and ``kinds`` hold: one per column, at least one.
    private let capacity: Int
    /// Per column: the mark of the last record that set it. A column whose mark is not the
    /// current record's is bound to NULL.
    private let stamps: UnsafeMutablePointer<UInt32>
    /// Per column: the type tag of the value the current record set (0 none, `b`, `j`).
    private let kinds: UnsafeMutablePointer<UInt8>
    /// Whether a text or bytes value was bound (the statement's bindings are then cleared
    /// after the step, so that it keeps no copy of them).
    @exclusivity(unchecked) private(set) var large = false
    /// Whether the model sent a non-null field the table has no column for.
    @exclusivity(unchecked) private(set) var hasExtra = false
    /// The order in which the model uses its fields.
    @exclusivity(unchecked) private var order = FieldOrder()

    init(meta: CollectionMeta, connection: SQLiteConnection) {
        self.meta = meta
        self.connection = connection
        capacity = max(meta.fields.count, 1)
        stamps = .allocate(capacity: capacity)
        stamps.initialize(repeating: 0, count: capacity)
        kinds = .allocate(capacity: capacity)
        kinds.initialize(repeating: 0, count: capacity)
        super.init()
    }

    deinit {
        stamps.deallocate()
        kinds.deallocate()
    }

    /// Starts a record bound to `statement`, one of the collection's write statements.
    func begin(_ statement: Statement) {
        handle = statement.handle
        order.rewind()
        large = false
        hasExtra = false
        stamp &+= 1
        if stamp == 0 {
            // After 2^32 records: old marks could look current again.
            stamps.update(repeating: 0, count: capacity)
            stamp = 1
        }
    }

    /// Forgets the statement (which the caller finishes).
    func end() { handle = nil }

    override func accept(_ value: FieldValue, forField name: String) throws {
        guard let handle else {
            throw DepotError(.internal, "A field was encoded outside a SQLite write.", collection: meta.name.rawValue)
        }
        guard let index = order.position(of: name, in: meta) else {
            if !value.isNull { hasExtra = true }
            return
        }
        stamps[index] = stamp
        let parameter = Int32(index) + 3
        if case .int(let int) = value {
            // The common case, bound without building an SQLValue.
            kinds[index] = 0
            let rc = sqlite3_bind_int64(handle, parameter, int)
            if rc != SQLITE_OK { throw bindFailure(rc) }
            return
        }
        try accept(other: value, index: index, parameter: parameter, handle: handle)
    }

    /// A value other than an integer: its type tag, then the binding of its SQL value.
    @inline(never)
    private func accept(other value: FieldValue, index: Int, parameter: Int32, handle: OpaquePointer) throws {
        switch value {
        case .bool: kinds[index] = UInt8(ascii: "b")
        case .array, .object:
            kinds[index] = UInt8(ascii: "j")
            large = true
        case .string, .bytes:
            kinds[index] = 0
            large = true
        default: kinds[index] = 0
        }
        let rc = try Statement.bind(SQLiteQueryTranslator.sqlValue(value), at: parameter, to: handle)
        if rc != SQLITE_OK { throw bindFailure(rc) }
    }

    /// The error of a failed binding, naming the statement.
    @inline(never)
    private func bindFailure(_ rc: Int32) -> DepotError {
        guard let handle else {
            return DepotError(.internal, "A field was encoded outside a SQLite write.", collection: meta.name.rawValue)
        }
        return connection.lastError(rc, sql: sqlite3_sql(handle).map { String(cString: $0) })
    }

    /// Finishes the record: binds NULL to the columns it did not set, its type tags to `?2`
    /// and `id` to `?1`. Returns whether any text or bytes were bound (``large``).
    func complete(id: SQLValue) throws -> Bool {
        guard let handle else { throw bindFailure(SQLITE_MISUSE) }
        var tags = ""
        for index in meta.fields.indices {
            guard stamps[index] == stamp else {
                let rc = sqlite3_bind_null(handle, Int32(index) + 3)
                if rc != SQLITE_OK { throw bindFailure(rc) }
                continue
            }
            let kind = kinds[index]
            if kind != 0 { tags += meta.columns[index] + (kind == UInt8(ascii: "b") ? ":b," : ":j,") }
        }
        if !tags.isEmpty { large = true }
        if case .text = id { large = true }
        var rc = try Statement.bind(tags.isEmpty ? .null : .text("," + tags), at: 2, to: handle)
        if rc == SQLITE_OK { rc = try Statement.bind(id, at: 1, to: handle) }
        if rc != SQLITE_OK { throw bindFailure(rc) }
        return large
    }
}
