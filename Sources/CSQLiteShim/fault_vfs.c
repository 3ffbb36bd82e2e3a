// The fault-injecting VFS of the SQLite driver's tests (Docs/SQLiteDriver.md, "I/O fault
// injection"). It wraps the default VFS (unix), numbers the operations that can fail from 1,
// and makes the chosen one (or it and every later one) fail the way the unix VFS reports
// EIO or ENOSPC.
#include "depot_sqlite_shim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEPOT_FAULT_LOG_LIMIT 4096

struct depot_fault_vfs {
    sqlite3_vfs vfs;          /* registered; pAppData points back here */
    sqlite3_vfs *real;        /* the wrapped VFS */
    pthread_mutex_t mutex;    /* guards everything below */
    long long count;          /* operations counted since the last arm/disarm */
    long long fail_at;        /* 0: nothing fails */
    int always;
    int kind;                 /* DEPOT_FAULT_EIO or DEPOT_FAULT_ENOSPC */
    long long failures;
    unsigned char log[DEPOT_FAULT_LOG_LIMIT];
    char name[64];
};

typedef struct FaultFile {
    sqlite3_file base;
    depot_fault_vfs *owner;
    sqlite3_file *real;       /* follows this struct in the same allocation */
} FaultFile;

/* Counts one operation; returns 1 when it must fail. */
static int tick(depot_fault_vfs *f, int op) {
    int fail = 0;
    pthread_mutex_lock(&f->mutex);
    f->count += 1;
    if (f->count <= DEPOT_FAULT_LOG_LIMIT) f->log[f->count - 1] = (unsigned char)op;
    if (f->fail_at > 0) {
        fail = f->always ? f->count >= f->fail_at : f->count == f->fail_at;
    }
    if (fail) f->failures += 1;
    pthread_mutex_unlock(&f->mutex);
    return fail;
}

static int kind_of(depot_fault_vfs *f) {
    pthread_mutex_lock(&f->mutex);
    int kind = f->kind;
    pthread_mutex_unlock(&f->mutex);
    return kind;
}

/* ---- sqlite3_io_methods ---- */

static int fClose(sqlite3_file *file) {
    FaultFile *p = (FaultFile *)file;
    return p->real->pMethods ? p->real->pMethods->xClose(p->real) : SQLITE_OK;
}

static int fRead(sqlite3_file *file, void *buf, int amount, sqlite3_int64 offset) {
    FaultFile *p = (FaultFile *)file;
    if (tick(p->owner, DEPOT_FAULT_OP_READ)) return SQLITE_IOERR_READ;
    return p->real->pMethods->xRead(p->real, buf, amount, offset);
}

static int fWrite(sqlite3_file *file, const void *buf, int amount, sqlite3_int64 offset) {
    FaultFile *p = (FaultFile *)file;
    if (tick(p->owner, DEPOT_FAULT_OP_WRITE)) {
        if (kind_of(p->owner) == DEPOT_FAULT_ENOSPC) {
            /* A full disk: a short write, then ENOSPC, which the unix VFS reports as SQLITE_FULL. */
            if (amount / 2 > 0) p->real->pMethods->xWrite(p->real, buf, amount / 2, offset);
            return SQLITE_FULL;
        }
        return SQLITE_IOERR_WRITE;
    }
    return p->real->pMethods->xWrite(p->real, buf, amount, offset);
}

static int fTruncate(sqlite3_file *file, sqlite3_int64 size) {
    FaultFile *p = (FaultFile *)file;
    if (tick(p->owner, DEPOT_FAULT_OP_TRUNCATE)) return SQLITE_IOERR_TRUNCATE;
    return p->real->pMethods->xTruncate(p->real, size);
}

static int fSync(sqlite3_file *file, int flags) {
    FaultFile *p = (FaultFile *)file;
    if (tick(p->owner, DEPOT_FAULT_OP_SYNC)) return SQLITE_IOERR_FSYNC;
    return p->real->pMethods->xSync(p->real, flags);
}

static int fFileSize(sqlite3_file *file, sqlite3_int64 *size) {
    FaultFile *p = (FaultFile *)file;
    if (tick(p->owner, DEPOT_FAULT_OP_FILESIZE)) return SQLITE_IOERR_FSTAT;
    return p->real->pMethods->xFileSize(p->real, size);
}

static int fLock(sqlite3_file *file, int level) {
    FaultFile *p = (FaultFile *)file;
    if (tick(p->owner, DEPOT_FAULT_OP_LOCK)) return SQLITE_IOERR_LOCK;
    return p->real->pMethods->xLock(p->real, level);
}

static int fUnlock(sqlite3_file *file, int level) {
    FaultFile *p = (FaultFile *)file;
    return p->real->pMethods->xUnlock(p->real, level);
}

static int fCheckReservedLock(sqlite3_file *file, int *out) {
    FaultFile *p = (FaultFile *)file;
    return p->real->pMethods->xCheckReservedLock(p->real, out);
}

static int fFileControl(sqlite3_file *file, int op, void *arg) {
    FaultFile *p = (FaultFile *)file;
    if (op == SQLITE_FCNTL_VFSNAME && arg) {
        /* SQLite frees the old name and takes ownership of the new one. */
        char *name = sqlite3_mprintf("%s/%z", p->owner->name, *(char **)arg);
        *(char **)arg = name;
        return SQLITE_OK;
    }
    return p->real->pMethods->xFileControl(p->real, op, arg);
}

static int fSectorSize(sqlite3_file *file) {
    FaultFile *p = (FaultFile *)file;
    return p->real->pMethods->xSectorSize(p->real);
}

static int fDeviceCharacteristics(sqlite3_file *file) {
    FaultFile *p = (FaultFile *)file;
    return p->real->pMethods->xDeviceCharacteristics(p->real);
}

static int fShmMap(sqlite3_file *file, int region, int size, int extend, void volatile **pp) {
    FaultFile *p = (FaultFile *)file;
    if (tick(p->owner, DEPOT_FAULT_OP_SHMMAP)) {
        *pp = 0;
        return kind_of(p->owner) == DEPOT_FAULT_ENOSPC ? SQLITE_IOERR_SHMSIZE : SQLITE_IOERR_SHMMAP;
    }
    return p->real->pMethods->xShmMap(p->real, region, size, extend, pp);
}

static int fShmLock(sqlite3_file *file, int offset, int n, int flags) {
    FaultFile *p = (FaultFile *)file;
    /* Only taking a lock can fail; releasing one always works (as in the unix VFS). */
    if ((flags & SQLITE_SHM_LOCK) && tick(p->owner, DEPOT_FAULT_OP_SHMLOCK)) return SQLITE_IOERR_SHMLOCK;
    return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}

static void fShmBarrier(sqlite3_file *file) {
    FaultFile *p = (FaultFile *)file;
    p->real->pMethods->xShmBarrier(p->real);
}

static int fShmUnmap(sqlite3_file *file, int deleteFlag) {
    FaultFile *p = (FaultFile *)file;
    return p->real->pMethods->xShmUnmap(p->real, deleteFlag);
}

/* Version 2: no xFetch/xUnfetch, so SQLite never memory-maps the file and every read of
   the database goes through fRead. */
static const sqlite3_io_methods fault_methods = {
    2, fClose, fRead, fWrite, fTruncate, fSync, fFileSize, fLock, fUnlock, fCheckReservedLock,
    fFileControl, fSectorSize, fDeviceCharacteristics, fShmMap, fShmLock, fShmBarrier, fShmUnmap,
    0, 0,
};

/* ---- sqlite3_vfs ---- */

static int vOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    FaultFile *p = (FaultFile *)file;
    p->owner = f;
    p->real = (sqlite3_file *)&p[1];
    p->real->pMethods = 0;
    p->base.pMethods = 0;
    if (tick(f, DEPOT_FAULT_OP_OPEN)) return SQLITE_CANTOPEN;
    int rc = f->real->xOpen(f->real, name, p->real, flags, outFlags);
    /* SQLite calls xClose when pMethods is set, even after a failed open. */
    if (p->real->pMethods) p->base.pMethods = &fault_methods;
    return rc;
}

static int vDelete(sqlite3_vfs *vfs, const char *name, int syncDir) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    if (tick(f, DEPOT_FAULT_OP_DELETE)) return SQLITE_IOERR_DELETE;
    return f->real->xDelete(f->real, name, syncDir);
}

static int vAccess(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    if (tick(f, DEPOT_FAULT_OP_ACCESS)) return SQLITE_IOERR_ACCESS;
    return f->real->xAccess(f->real, name, flags, out);
}

static int vFullPathname(sqlite3_vfs *vfs, const char *name, int n, char *out) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    return f->real->xFullPathname(f->real, name, n, out);
}

static void *vDlOpen(sqlite3_vfs *vfs, const char *name) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    return f->real->xDlOpen(f->real, name);
}

static void vDlError(sqlite3_vfs *vfs, int n, char *out) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    f->real->xDlError(f->real, n, out);
}

static void (*vDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    return f->real->xDlSym(f->real, handle, symbol);
}

static void vDlClose(sqlite3_vfs *vfs, void *handle) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    f->real->xDlClose(f->real, handle);
}

static int vRandomness(sqlite3_vfs *vfs, int n, char *out) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    return f->real->xRandomness(f->real, n, out);
}

static int vSleep(sqlite3_vfs *vfs, int microseconds) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    return f->real->xSleep(f->real, microseconds);
}

static int vCurrentTime(sqlite3_vfs *vfs, double *out) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    return f->real->xCurrentTime(f->real, out);
}

static int vGetLastError(sqlite3_vfs *vfs, int n, char *out) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    return f->real->xGetLastError ? f->real->xGetLastError(f->real, n, out) : 0;
}

static int vCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    depot_fault_vfs *f = (depot_fault_vfs *)vfs->pAppData;
    if (f->real->iVersion >= 2 && f->real->xCurrentTimeInt64) return f->real->xCurrentTimeInt64(f->real, out);
    double now = 0;
    int rc = f->real->xCurrentTime(f->real, &now);
    *out = (sqlite3_int64)(now * 86400000.0);
    return rc;
}

depot_fault_vfs *depot_fault_vfs_register(const char *name) {
    if (!name || strlen(name) >= sizeof(((depot_fault_vfs *)0)->name)) return 0;
    if (depot_sqlite_initialize() != SQLITE_OK) return 0;
    if (sqlite3_vfs_find(name)) return 0;
    sqlite3_vfs *real = sqlite3_vfs_find(0);
    if (!real) return 0;
    depot_fault_vfs *f = calloc(1, sizeof(depot_fault_vfs));
    if (!f) return 0;
    if (pthread_mutex_init(&f->mutex, 0) != 0) {
        free(f);
        return 0;
    }
    strcpy(f->name, name);
    f->real = real;
    f->vfs.iVersion = 2;
    f->vfs.szOsFile = (int)sizeof(FaultFile) + real->szOsFile;
    f->vfs.mxPathname = real->mxPathname;
    f->vfs.zName = f->name;
    f->vfs.pAppData = f;
    f->vfs.xOpen = vOpen;
    f->vfs.xDelete = vDelete;
    f->vfs.xAccess = vAccess;
    f->vfs.xFullPathname = vFullPathname;
    f->vfs.xDlOpen = vDlOpen;
    f->vfs.xDlError = vDlError;
    f->vfs.xDlSym = vDlSym;
    f->vfs.xDlClose = vDlClose;
    f->vfs.xRandomness = vRandomness;
    f->vfs.xSleep = vSleep;
    f->vfs.xCurrentTime = vCurrentTime;
    f->vfs.xGetLastError = vGetLastError;
    f->vfs.xCurrentTimeInt64 = vCurrentTimeInt64;
    if (sqlite3_vfs_register(&f->vfs, 0) != SQLITE_OK) {
        pthread_mutex_destroy(&f->mutex);
        free(f);
        return 0;
    }
    return f;
}

void depot_fault_vfs_arm(depot_fault_vfs *f, long long n, int always, int kind) {
    pthread_mutex_lock(&f->mutex);
    f->count = 0;
    f->failures = 0;
    f->fail_at = n;
    f->always = always;
    f->kind = kind;
    pthread_mutex_unlock(&f->mutex);
}

void depot_fault_vfs_disarm(depot_fault_vfs *f) {
    depot_fault_vfs_arm(f, 0, 0, DEPOT_FAULT_EIO);
}

long long depot_fault_vfs_count(depot_fault_vfs *f) {
    pthread_mutex_lock(&f->mutex);
    long long count = f->count;
    pthread_mutex_unlock(&f->mutex);
    return count;
}

long long depot_fault_vfs_failures(depot_fault_vfs *f) {
    pthread_mutex_lock(&f->mutex);
    long long failures = f->failures;
    pthread_mutex_unlock(&f->mutex);
    return failures;
}

int depot_fault_vfs_operation(depot_fault_vfs *f, long long index) {
    int op = -1;
    pthread_mutex_lock(&f->mutex);
    if (index >= 1 && index <= f->count && index <= DEPOT_FAULT_LOG_LIMIT) op = f->log[index - 1];
    pthread_mutex_unlock(&f->mutex);
    return op;
}

const char *depot_fault_vfs_name(depot_fault_vfs *f) { return f->name; }
