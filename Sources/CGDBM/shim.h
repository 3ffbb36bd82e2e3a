// The GNU dbm C API (libgdbm-dev). Swift cannot see the `gdbm_errno` macro: read errors
// through gdbm_errno_location(), gdbm_last_errno() and gdbm_db_strerror() instead.
#include <gdbm.h>
// The GDBM driver's checksum, folded with PCLMULQDQ on x86-64 (header-only, no library).
#include "crc32_fold.h"
