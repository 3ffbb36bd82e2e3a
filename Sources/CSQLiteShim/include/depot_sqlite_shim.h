#ifndef DEPOT_SQLITE_SHIM_H
#define DEPOT_SQLITE_SHIM_H

#include <sqlite3.h>

/// Applies Depot's safety settings to a fresh connection through the variadic
/// sqlite3_db_config, which Swift cannot call: defensive mode on, double-quoted string
/// literals off (DDL and DML), trusted_schema off. Returns SQLITE_OK or the first error.
int depot_sqlite_harden(sqlite3 *db);

/// sqlite3_bind_text with SQLITE_TRANSIENT (SQLite copies the bytes); NULL text binds ''.
int depot_sqlite_bind_text(sqlite3_stmt *stmt, int index, const char *text, int length);

/// sqlite3_bind_blob with SQLITE_TRANSIENT (SQLite copies the bytes).
int depot_sqlite_bind_blob(sqlite3_stmt *stmt, int index, const void *bytes, int length);

#endif
