import DepotCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Lets a read skip the `stat` of the store file while nothing in the store's folder has
/// changed, using the kernel's file change notification (inotify, Linux; elsewhere, or when
/// inotify cannot be had, there is no watch and every read `stat`s as before).
/// Docs/JSONFileDriver.md, "Reads", says what it notices and what it does not.
///
/// One inotify instance serves the whole process (a user may open only a few), with one
/// kernel watch per folder, shared by the stores in it; each store keeps its own marks. The
/// contract, for any thread:
/// - ``isQuiet()`` is `true` only when no event is waiting in the instance, no drain is under
///   way, and this store's last ``drainThenVerify(_:)`` found its published state to be the
///   file's current content, with no event for the folder since.
/// - ``drainThenVerify(_:)`` consumes every waiting event (marking every store of each
///   event's folder unverified before it lets the drain be seen as finished), then runs the
///   caller's check (a `stat` compared with the published identity, taken after the events
///   were consumed) and marks this store verified only when the check passed.
///
/// So an edit that completed before a read began either still has its event waiting (the
/// read `stat`s), or had it consumed by a drainer that marked the store unverified before
/// finishing (the read `stat`s), unless a check that ran after that drain found the file to
/// be the published one. The store's own commits leave events waiting too, so the first read
/// after a commit checks the file once.
package final class FileChangeWatch: Sendable {
    private let hub: InotifyHub
    private let folder: InotifyHub.Mark

    fileprivate init(hub: InotifyHub, folder: InotifyHub.Mark) {
        self.hub = hub
        self.folder = folder
    }

    /// A watch over `directory` (every entry's creation, change, rename and removal, and the
    /// folder's own move or removal), or `nil` where the platform has no inotify or the
    /// process cannot have an instance or another watch.
    /// `hub`: the process's shared instance unless a test gives one of its own.
    package static func make(directory: String, hub: InotifyHub? = InotifyHub.shared) -> FileChangeWatch? {
        guard let hub, let folder = hub.add(directory) else { return nil }
        return FileChangeWatch(hub: hub, folder: folder)
    }

    /// `true` when nothing was reported for the folder since this store's state was last
    /// verified (one `ioctl`, no path lookup).
    package func isQuiet() -> Bool { hub.isQuiet(folder) }

    /// Consumes the waiting events, then runs `check`; a non-`nil` answer marks the folder
    /// verified. Returns `.some(check's answer)`, or `nil` without running it when another
    /// thread is draining (the caller then checks the file itself).
    package func drainThenVerify<T: Sendable>(_ check: () throws -> T?) throws -> T?? {
        try hub.drainThenVerify(folder, check)
    }

    deinit { hub.remove(folder) }
}

/// The process's inotify instance and its watches (see ``FileChangeWatch``).
package final class InotifyHub: Sendable {
    /// One store's marks on its folder's watch: whether its published state may be trusted
    /// without a `stat`.
    final class Mark: Sendable {
        /// The folder's watch descriptor.
        let descriptor: Int32
        /// `true` from an event for the folder until this store's check after it passed.
        let unverified = Atomic<Bool>(true)
        /// The folder was removed or moved, or the queue overflowed: never quiet again.
        let lost = Atomic<Bool>(false)
        init(descriptor: Int32) { self.descriptor = descriptor }
    }

    struct Table {
        /// The marks of the stores in each watched folder.
        var folders: [Int32: [Mark]] = [:]
    }

    /// The shared instance; `nil` where there is none.
    static let shared: InotifyHub? = make()

    private let descriptor: Int32
    /// The watch table; held also for a whole drain and check.
    private let table = Locked(Table())
    /// `true` while a drain consumes events it has not yet marked on their folders.
    private let draining = Atomic<Bool>(false)

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { _ = posixClose(descriptor) }

    /// A new instance (tests use their own, away from other stores' events); `nil` where
    /// there is none.
    static func make() -> InotifyHub? {
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        return fd >= 0 ? InotifyHub(descriptor: fd) : nil
        #else
        return nil
        #endif
    }

    func add(_ directory: String) -> Mark? {
        #if os(Linux)
        let mask = UInt32(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)
        return table.withLock { table -> Mark? in
            let wd = inotify_add_watch(descriptor, directory, mask)
            guard wd >= 0 else { return nil }
            let mark = Mark(descriptor: wd)
            table.folders[wd, default: []].append(mark)
            return mark
        }
        #else
        return nil
        #endif
    }

    func remove(_ mark: Mark) {
        #if os(Linux)
        table.withLock { table in
            guard var marks = table.folders[mark.descriptor] else { return }
            marks.removeAll { $0 === mark }
            if marks.isEmpty {
                table.folders[mark.descriptor] = nil
                _ = inotify_rm_watch(descriptor, mark.descriptor)
            } else {
                table.folders[mark.descriptor] = marks
            }
        }
        #endif
    }

    func isQuiet(_ folder: Mark) -> Bool {
        #if os(Linux)
        var waiting: Int32 = 0
        guard ioctl(descriptor, UInt(FIONREAD), &waiting) == 0, waiting == 0 else { return false }
        return !draining.load(ordering: .sequentiallyConsistent) && !folder.unverified.load(ordering: .sequentiallyConsistent)
            && !folder.lost.load(ordering: .sequentiallyConsistent)
        #else
        return false
        #endif
    }

    func drainThenVerify<T: Sendable>(_ folder: Mark, _ check: () throws -> T?) throws -> T?? {
        #if os(Linux)
        let outcome: T?? = try table.withLockIfAvailable { table throws -> T? in
            draining.store(true, ordering: .sequentiallyConsistent)
            drain(table)
            draining.store(false, ordering: .sequentiallyConsistent)
            folder.unverified.store(true, ordering: .sequentiallyConsistent)
            let answer = try check()
            if answer != nil { folder.unverified.store(false, ordering: .sequentiallyConsistent) }
            return answer
        }
        return outcome
        #else
        return nil
        #endif
    }

    #if os(Linux)
    /// Reads every waiting event and marks every store of its folder unverified (or lost).
    private func drain(_ table: Table) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }  // EAGAIN: drained
            buffer.withUnsafeBytes { bytes in
                var at = 0
                // struct inotify_event: int wd, uint32 mask, uint32 cookie, uint32 len, name[len].
                while at + 16 <= n {
                    let wd = bytes.loadUnaligned(fromByteOffset: at, as: Int32.self)
                    let mask = bytes.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self)
                    let length = Int(bytes.loadUnaligned(fromByteOffset: at + 12, as: UInt32.self))
                    at += 16 + length
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                        // Events were dropped: no folder can be trusted without a stat again.
                        for mark in table.folders.values.joined() {
                            mark.lost.store(true, ordering: .sequentiallyConsistent)
                            mark.unverified.store(true, ordering: .sequentiallyConsistent)
                        }
                        continue
                    }
                    let lost = mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) != 0
                    for mark in table.folders[wd] ?? [] {
                        mark.unverified.store(true, ordering: .sequentiallyConsistent)
                        if lost { mark.lost.store(true, ordering: .sequentiallyConsistent) }
                    }
                }
            }
        }
    }
    #endif
}

private func posixClose(_ fd: Int32) -> Int32 { close(fd) }
