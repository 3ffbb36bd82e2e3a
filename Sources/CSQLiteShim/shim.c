#include "depot_sqlite_shim.h"
#include <pthread.h>

static pthread_once_t depot_sqlite_once = PTHREAD_ONCE_INIT;
static int depot_sqlite_initialized = SQLITE_OK;

static void depot_sqlite_initialize_once(void) {
    // Only possible before SQLite initializes; SQLITE_MISUSE when other code in the process
    // initialized it first, and then its settings stand (Docs/SQLiteDriver.md, "Library
    // settings").
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    depot_sqlite_initialized = sqlite3_initialize();
}

int depot_sqlite_initialize(void) {
    pthread_once(&depot_sqlite_once, depot_sqlite_initialize_once);
    return depot_sqlite_initialized;
}

int depot_sqlite_harden(sqlite3 *db) {
    int rc;
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, (int *)0);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, (int *)0);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)0);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)0);
    return rc;
}

int depot_sqlite_bind_text(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text ? text : "", length, SQLITE_TRANSIENT);
}

int depot_sqlite_bind_blob(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    if (length == 0) return sqlite3_bind_zeroblob(stmt, index, 0);
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_TRANSIENT);
}
