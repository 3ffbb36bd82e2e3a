#ifndef DEPOT_SQLITE_SHIM_H
#define DEPOT_SQLITE_SHIM_H

#include <sqlite3.h>

/// Initializes SQLite once per process with Depot's library settings: no global memory
/// statistics (SQLITE_CONFIG_MEMSTATUS off), so allocations take no process-wide mutex.
/// Settings can only be made before SQLite first initializes; when other code in the process
/// initialized it earlier, its settings stand. Returns sqlite3_initialize's result. Thread safe.
int depot_sqlite_initialize(void);

/// Applies Depot's safety settings to a fresh connection through the variadic
/// sqlite3_db_config, which Swift cannot call: defensive mode on, double-quoted string
/// literals off (DDL and DML), trusted_schema off. Returns SQLITE_OK or the first error.
int depot_sqlite_harden(sqlite3 *db);

/// sqlite3_bind_text with SQLITE_TRANSIENT (SQLite copies the bytes); NULL text binds ''.
int depot_sqlite_bind_text(sqlite3_stmt *stmt, int index, const char *text, int length);

/// sqlite3_bind_blob with SQLITE_TRANSIENT (SQLite copies the bytes).
int depot_sqlite_bind_blob(sqlite3_stmt *stmt, int index, const void *bytes, int length);

/// A fault-injecting VFS for tests (Docs/SQLiteDriver.md, "I/O fault injection"): wraps the
/// default VFS under its own name, numbers the operations that can fail (opens, deletes,
/// access checks, reads, writes, truncates, syncs, file sizes, file locks, shared-memory
/// maps and shared-memory lock acquisitions) from 1, and fails the chosen one once, or it
/// and every later one, as the unix VFS reports EIO or ENOSPC. Thread safe (a mutex).
/// Never the default VFS: only connections that name it use it.
typedef struct depot_fault_vfs depot_fault_vfs;

/// What an injected failure imitates.
enum {
    /// An I/O error: SQLITE_IOERR_READ, _WRITE, _TRUNCATE, _FSYNC, _FSTAT, _LOCK, _SHMMAP,
    /// _SHMLOCK, _DELETE, _ACCESS, or SQLITE_CANTOPEN for an open.
    DEPOT_FAULT_EIO = 0,
    /// A full disk: a write writes half its bytes and fails with SQLITE_FULL; a shared-memory
    /// map fails with SQLITE_IOERR_SHMSIZE; other operations fail as with DEPOT_FAULT_EIO.
    DEPOT_FAULT_ENOSPC = 1,
};

/// The operations counted, as recorded in the log (depot_fault_vfs_operation).
enum {
    DEPOT_FAULT_OP_OPEN = 1, DEPOT_FAULT_OP_DELETE, DEPOT_FAULT_OP_ACCESS, DEPOT_FAULT_OP_READ,
    DEPOT_FAULT_OP_WRITE, DEPOT_FAULT_OP_TRUNCATE, DEPOT_FAULT_OP_SYNC, DEPOT_FAULT_OP_FILESIZE,
    DEPOT_FAULT_OP_LOCK, DEPOT_FAULT_OP_SHMMAP, DEPOT_FAULT_OP_SHMLOCK,
};

/// Registers a new fault VFS named `name` (under 64 bytes, not yet registered) over the
/// default VFS, disarmed. Returns NULL on failure. It stays registered for the process's life.
depot_fault_vfs *depot_fault_vfs_register(const char *name);

/// Restarts counting at zero and makes operation `n` (1-based) fail: only it (`always` 0)
/// or it and every later one (`always` 1), imitating `kind` (DEPOT_FAULT_EIO or _ENOSPC).
void depot_fault_vfs_arm(depot_fault_vfs *vfs, long long n, int always, int kind);

/// Restarts counting at zero with no failure planned.
void depot_fault_vfs_disarm(depot_fault_vfs *vfs);

/// Operations counted since the last arm or disarm.
long long depot_fault_vfs_count(depot_fault_vfs *vfs);

/// Operations made to fail since the last arm or disarm.
long long depot_fault_vfs_failures(depot_fault_vfs *vfs);

/// The kind (DEPOT_FAULT_OP_*) of counted operation `index` (1-based; the first 4096 are
/// kept), or -1.
int depot_fault_vfs_operation(depot_fault_vfs *vfs, long long index);

/// The name the VFS was registered under.
const char *depot_fault_vfs_name(depot_fault_vfs *vfs);

#endif
