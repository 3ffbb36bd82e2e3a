import CGDBM
import DepotCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Extra gdbm handles, opened read-only, through which read transactions fetch records
/// side by side instead of one at a time under the files lock (Docs/GDBMDriver.md,
/// "Concurrent reads").
///
/// A gdbm handle keeps the file's header, directory and recently read buckets in memory, so
/// a handle opened before the writer changed the file may read stale structure (a deleted
/// record still found, a moved one missed). What makes these handles safe is the engine's
/// files lock: every change to the files happens with it held for writing (and bumps
/// ``FileSet/changeCount``), every read transaction holds it for reading. While a reader
/// holds it nothing changes, so a handle opened at the current change count reads exactly
/// what the writer's handle would.
///
/// They are for reads that would otherwise wait (``FileSet/fetchForReader(_:_:layouts:)``):
/// a read uses its thread's handle if that is current, else the writer's handle if no other
/// thread is inside gdbm at that moment (its mapping and bucket cache are warm), and only
/// then opens or reopens a handle here, so a thread reading alone never does. The handles sit in a
/// few *slots*, each with its own lock and its own handles; a thread keeps to one slot
/// (chosen when it first reads), so two threads reading at once take different locks and
/// touch different memory. A fresh handle costs something (opening it takes 20–45 µs on a
/// 100,000-record file, its first reads fault the file's pages into its own mapping, and
/// closing it unmaps them, ~3 ms), so after a change a slot's handles are reopened only once
/// the files have been left unchanged for ``quietNanoseconds``; until then its reads wait for
/// the writer's handle as before. Read-mostly phases read in parallel; workloads that write
/// all the time never reopen. Stale handles are closed on a thread of their own.
final class ReaderHandles: @unchecked Sendable {
    // @unchecked: each slot's state is guarded by the slot's own lock; `slots` never changes
    // after init.

    /// How long the files must have been left unchanged before a slot reopens its handles.
    static let quietNanoseconds: UInt64 = 2_000_000

    /// One slot: its lock, its open handles and the change count they were opened at.
    final class Slot {
        /// On its own cache lines: the slots of two threads never share one.
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        /// The open handles, a few at most (one per file read): a list, not a table.
        var handles: [(id: FileID, handle: OpaquePointer)] = []
        /// Files this slot could not open at `openedAt` (read through the writer's handle).
        var unopenable: [FileID] = []
        /// The ``FileSet/changeCount`` the handles were opened at.
        var openedAt: UInt64 = .max {
            didSet { current.store(openedAt, ordering: .relaxed) }
        }
        /// `openedAt`, readable without the slot's lock: a read whose thread's slot is stale
        /// goes on to the writer's handle without taking that lock.
        let current = Atomic<UInt64>(.max)
        /// Handles opened over the slot's life (for tests).
        var opens = 0
        /// Copies of the store's field layouts (``FieldLayoutCache``), made for this slot so
        /// that decoding touches no object another reading thread touches, and the cache's
        /// ``FieldLayoutCache/version`` they are copies at.
        var layouts: [FieldLayout] = []
        var layoutsVersion = -1

        init() {
            let raw = UnsafeMutableRawPointer.allocate(byteCount: 128, alignment: 128)
            mutex = raw.bindMemory(to: pthread_mutex_t.self, capacity: 1)
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }

        deinit {
            closeAll()
            pthread_mutex_destroy(mutex)
            mutex.deinitialize(count: 1)
            UnsafeMutableRawPointer(mutex).deallocate()
        }

        func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }
        func lock() { pthread_mutex_lock(mutex) }
        func unlock() { pthread_mutex_unlock(mutex) }

        func closeAll() {
            for (_, handle) in handles { gdbm_close(handle) }
            handles.removeAll()
            unopenable.removeAll()
            openedAt = .max
        }

        /// Forgets the handles and closes them on a thread of its own (closing unmaps the
        /// pages a handle read, which takes milliseconds).
        func retire() {
            let stale = StaleHandles(handles.map(\.handle))
            handles.removeAll()
            unopenable.removeAll()
            openedAt = .max
            guard !stale.handles.isEmpty else { return }
            let closer = Thread { for handle in stale.handles { gdbm_close(handle) } }
            closer.name = "depot.gdbm.close"
            closer.start()
        }
    }

    /// Unmanaged: taking a slot retains nothing (a reference count written by two reading
    /// threads would bounce between their cores like a shared lock word).
    private let slots: UnsafeMutableBufferPointer<Unmanaged<Slot>>
    /// Streams reading with gdbm's mapping off: while any runs, reads use the writer's
    /// handle, so the stream's pages stay unmapped (``GDBMFile/beginUnmappedReads()``).
    let unmappedStreams = Atomic<Int>(0)

    /// `count` slots (at least 1).
    init(slots count: Int) {
        slots = .allocate(capacity: max(1, count))
        _ = slots.initialize(from: (0..<slots.count).map { _ in Unmanaged.passRetained(Slot()) })
    }

    deinit {
        for slot in slots { slot.release() }
        slots.deallocate()
    }

    /// Handles no slot uses any more, on their way to be closed.
    private struct StaleHandles: @unchecked Sendable {
        // @unchecked: no one else holds these handles.
        let handles: [OpaquePointer]
        init(_ handles: [OpaquePointer]) { self.handles = handles }
    }

    /// The number of slots for this machine: one per processor, 2 to 8.
    static var defaultSlots: Int { min(8, max(2, ProcessInfo.processInfo.activeProcessorCount)) }

    /// What a fetch through a reader handle found.
    enum Fetched: ~Copyable {
        /// The value, and the slot's copies of the field layouts to decode it with.
        case found(FetchedValue, [FieldLayout])
        /// The key is absent.
        case absent
        /// Not done (slots busy, handles stale, a stream running, the handle failed): read
        /// through the writer's handle instead.
        case declined
    }

    /// Fetches `key` from the file `id` (at `path`) through this thread's slot. The caller
    /// holds the engine's files lock for reading; `changeCount` and `changedAt` are the file
    /// set's, read under it. The value comes with the slot's copies of `layouts`' field
    /// layouts (to decode it with, after the slot is released: they never change).
    /// With `onlyIfCurrent`, a slot whose handles are stale declines rather than reopening
    /// them.
    /// `quiet` is how long the files must have been unchanged before stale handles are
    /// reopened (``quietNanoseconds``).
    func fetch(_ id: FileID, path: @autoclosure () -> String, changeCount: UInt64, changedAt: UInt64, onlyIfCurrent: Bool, quiet: UInt64 = ReaderHandles.quietNanoseconds, layouts: FieldLayoutCache, _ key: [UInt8]) -> Fetched {
        guard unmappedStreams.load(ordering: .relaxed) == 0, let taken = takeSlot(onlyIfCurrent ? changeCount : nil) else { return .declined }
        // gdbm's answer (its allocation, or no pointer for an absent key) and the layouts;
        // `nil` when declined.
        let answer = taken._withUnsafeGuaranteedRef { slot -> (datum, [FieldLayout])? in
            defer { slot.unlock() }
            if slot.openedAt != changeCount {
                guard !onlyIfCurrent, GDBMEngine.monotonicNanoseconds() &- changedAt >= quiet else { return nil }
                slot.retire()
                slot.openedAt = changeCount
            }
            guard let handle = handle(id, path: path, in: slot) else { return nil }
            let found = key.withUnsafeBytes { raw -> datum in
                let k = datum(dptr: UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(raw.count))
                return gdbm_fetch(handle, k)
            }
            if found.dptr == nil && Int(gdbm_last_errno(handle)) != Int(GDBM_ITEM_NOT_FOUND) {
                // The writer's handle reads it again and reports what it finds.
                drop(id, from: slot)
                return nil
            }
            if layouts.version.load(ordering: .acquiring) != slot.layoutsVersion {
                let (version, shared) = layouts.snapshot()
                slot.layouts = shared.compactMap { FieldLayout(names: $0.names) }
                slot.layoutsVersion = version
            }
            return (found, slot.layouts)
        }
        guard let (found, slotLayouts) = answer else { return .declined }
        guard let value = FetchedValue(found) else { return .absent }
        return .found(value, slotLayouts)
    }

    /// The open handle of `id` in `slot`, opening it; `nil` when it cannot be opened.
    private func handle(_ id: FileID, path: () -> String, in slot: Slot) -> OpaquePointer? {
        for entry in slot.handles where entry.id == id { return entry.handle }
        if slot.unopenable.contains(id) { return nil }
        // No file locking: the writer's handle holds gdbm's lock, and the files lock orders
        // these reads after every change. No GDBM_XVERIFY: its checks run at open (~0.65 ms
        // on a 100,000-record file), and the writer's handle made them when it opened the
        // file, which only it has written since; gdbm's checks while reading still apply.
        let flags = GDBM_READER | GDBM_NOLOCK | GDBM_CLOEXEC
        guard let handle = gdbm_open(path(), 0, flags, 0, nil) else {
            slot.unopenable.append(id)
            return nil
        }
        var cacheSize = GDBMFile.bucketCacheSize
        _ = gdbm_setopt(handle, GDBM_SETCACHESIZE, &cacheSize, Int32(MemoryLayout<Int>.size))
        slot.handles.append((id, handle))
        slot.opens += 1
        return handle
    }

    private func drop(_ id: FileID, from slot: Slot) {
        guard let i = slot.handles.firstIndex(where: { $0.id == id }) else { return }
        gdbm_close(slot.handles[i].handle)
        slot.handles.remove(at: i)
        slot.unopenable.append(id)
    }

    /// This thread's slot, locked; another free one when it is busy; `nil` when all are.
    /// With `current`, only this thread's slot, and only if its handles were opened at that
    /// change count.
    private func takeSlot(_ current: UInt64?) -> Unmanaged<Slot>? {
        let first = ReaderHandles.threadIndex() % slots.count
        if let current {
            let slot = slots[first]
            let taken = slot._withUnsafeGuaranteedRef { $0.current.load(ordering: .relaxed) == current && $0.tryLock() }
            return taken ? slot : nil
        }
        for i in 0..<slots.count {
            let slot = slots[(first + i) % slots.count]
            if slot._withUnsafeGuaranteedRef({ $0.tryLock() }) { return slot }
        }
        return nil
    }

    /// Closes every handle (the files are changing or closing). The caller holds the files
    /// lock for writing, so no reader is inside a slot.
    func closeAll() {
        for slot in slots {
            slot._withUnsafeGuaranteedRef { slot in
                slot.lock()
                slot.closeAll()
                slot.unlock()
            }
        }
    }

    /// Handles opened so far, over all slots (for tests).
    var opens: Int {
        slots.reduce(0) { total, slot in
            slot._withUnsafeGuaranteedRef { slot in
                slot.lock()
                defer { slot.unlock() }
                return total + slot.opens
            }
        }
    }

    // MARK: Threads to slots

    /// A small number per thread, given out in order on first use.
    private static func threadIndex() -> Int {
        let key = threadKey.key
        if let value = pthread_getspecific(key) { return Int(bitPattern: value) - 1 }
        let index = nextThread.add(1, ordering: .relaxed).oldValue
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: index + 1))
        return index
    }

    private static let nextThread = Atomic<Int>(0)

    private final class ThreadKey: Sendable {
        let key: pthread_key_t
        init() {
            var key = pthread_key_t()
            pthread_key_create(&key, nil)
            self.key = key
        }
    }

    private static let threadKey = ThreadKey()
}
