/* nvstream.h: the NVStream wrapper API over nvs, for codes already instrumented for
 * NVStream (link with -lnvs). Written by hand, as NVStream declares it.
 *
 * One process is one rank. nvs_init(rank) opens the rank's pool, or creates it:
 *   $NVS_DIR/$NVS_NAME.<rank>.pool   (defaults: NVS_DIR=/dev/shm, NVS_NAME=nvs)
 *   NVS_POOL_SIZE  size of a new pool (default 256M; K, M, G, T suffixes)
 *   NVS_SEGMENT_SIZE  its segment size (default without NVS_DELTA 1M, less below a 16M
 *                  pool: a snapshot takes whole segments, so one of a few MB wastes under
 *                  one segment; with NVS_DELTA 1/16 of the pool, as a delta's parent
 *                  must lie in the current segment)
 *   NVS_DELTA=1    snapshots store only the pages written since the last one (objects
 *                  live in memory the kernel tracks: userfaultfd write-protect, async
 *                  mode, Linux >= 6.7, a descriptor per object). Where the kernel lacks
 *                  it, snapshots store every object in full (said once on stderr).
 *   NVS_DELTA=mprotect  track with mprotect and a SIGSEGV handler instead (any Linux),
 *                  only when asked for: a system call or another process writing into a
 *                  tracked object fails with EFAULT (read, fread, recv, MPI receives
 *                  into it: read into other memory and copy), and at most 16384
 *                  objects are tracked at once
 *   NVS_KEEP=K     a snapshot that finds the pool full reclaims, keeping the K newest
 *                  versions of each object (K >= 1), and tries once more (still full:
 *                  it fails, saying that reclaim ran and what it freed). A follower
 *                  (nvs_follower_wait) that has not read the released versions yet
 *                  skips them, silently
 *   NVS_STATS=1    nvs_finalize prints what the rank stored on stderr: snapshots, the
 *                  objects' bytes, and the bytes stored (fewer with NVS_DELTA)
 * nvs_init reads them all. NVS_DELTA and NVS_STATS are yes/no: 1/0, true/false, on/off,
 * yes/no, in any case. Blanks around a value are ignored; a value that is not one fails
 * nvs_init (NVS_E_ARG, naming the variable) before any pool is created.
 * A restarted rank appends: its next snapshot makes the next version of each object. A
 * rank whose pool another live process holds (the same rank started twice) fails with
 * NVS_E_BUSY ("locked by another writer"). After a failed nvs_init, the other calls fail
 * saying that nvs_init failed and why.
 *
 * nvs_alloc(n, name) returns zeroed memory for n bytes of the object `name` (NUL-
 * terminated, 1 to 255 bytes), registered with the rank; NULL on failure (a name
 * registered already, no nvs_init). nvs_snapshot(rank) puts every registered object as
 * one batch: one commit, the next version of each, durable when it returns (with none
 * registered it does nothing). Do not write the objects while a snapshot runs. nvs_free unregisters (and frees) one. nvs_finalize
 * ends the rank's stream (followers see its end), closes the pool and frees every
 * registered object.
 *
 * nvs_init and nvs_finalize return 0 or an NVS_E_* status (nvs.h). Every failure is
 * printed on stderr (the same failure again and again, as a snapshot every step into a
 * full pool, the 1st, 2nd, 4th, 8th... time, with its count) and kept for
 * nvs_last_error() (declared here too), and every call
 * here clears it when it starts: after nvs_snapshot, which returns nothing,
 *   if (*nvs_last_error()) ... the snapshot failed (the message says why)
 * The calls are thread-safe; the last error is per thread. They are not
 * async-signal-safe: a call from a signal handler that interrupted any nvs call of the
 * same thread (a checkpoint on SIGTERM) fails at once with NVS_E_BUSY, the re-entry named in
 * nvs_last_error(), instead of waiting for ever for the lock its thread holds; set a
 * flag in the handler and snapshot after it returns. A child that fork() makes of a
 * rank writes nothing: its nvs_snapshot fails (the parent's delta tracking untouched),
 * its nvs_finalize closes without ending the parent's stream; if another thread of the
 * parent was inside a call at the fork, every call in the child fails (NVS_E_BUSY, within
 * ~20 ms) rather than wait for that thread's lock; if none was, the child's threads wait
 * for each other as any process's do.
 *
 * Fortran: the underscored entry points take their arguments by reference, as
 * gfortran passes them. nvs_snapshot_ never reads its argument (it snapshots this
 * process's rank), as NVStream's did not: `call nvs_snapshot()` with none (GTC) works.
 * alloc/alloc_ take the name as Fortran passes a character(len=10) through bind(C) or an
 * implicit interface, blank-padded with no NUL and no length (CM1, GTC): the name is its
 * bytes up to the first that is not an ASCII letter, digit, `_`, `-` or `.` (a NUL, the
 * padding, anything else); so 'rain      ' is "rain". A name that fills its declared
 * length runs on into what follows it unless that is such a byte: add //c_null_char. A
 * name that cannot be registered (empty, none in 256 bytes, registered already, no rank:
 * nvs_init failed or was not called) is an error on stderr and in nvs_last_error(), and
 * alloc still returns zeroed memory the app can use, which no snapshot stores (the app
 * carries on, as with NVStream; nvs_free frees it). nvs_free and
 * nvs_free_ after nvs_finalize do nothing (miniAMR frees after it). Each object has
 * padding around it (64 bytes, a page under NVS_DELTA), as malloc'd memory has slack: a
 * read or write just outside an array (a 0- vs 1-based port's: GTC's chargei writes
 * zonali(0)) lands there, untracked and never stored, instead of faulting.
 * Legacy code with implicit interfaces (integer*8 alloc; pointer (p, a);
 * p = alloc(n, 'temp'//char(0)), -fcray-pointer) links to alloc_, which is alloc.
 *
 * NVStream's C++ Store API (its readers: nvs::StoreManager::GetInstance, get,
 * get_with_malloc, put, put_all...) is in nvs/store.h and nvs/store_manager.h. What
 * differs from NVStream:
 *   where        NVStream: its own heap files per store id.  nvs: one pool file per rank,
 *                $NVS_DIR/$NVS_NAME.<rank>.pool; the Store's id "name/rank" maps to
 *                $NVS_DIR/name.rank.pool, NVS_NAME standing for the name when set (a
 *                Store reader of a wrapper-written app sets NVS_NAME=nvs, or the app's
 *                run sets NVS_NAME to the id its NVStream wrapper used, e.g. gtc_store)
 *   rerun        NVStream: a rerun's versions start again at 1.  nvs: a restarted rank
 *                appends, its next snapshot is the next version of each object
 *   size         NVStream: a log that fills exits the process.  nvs: the pool has
 *                NVS_POOL_SIZE bytes; a full one fails the snapshot (NVS_E_FULL, said
 *                on stderr with what to do) unless NVS_KEEP reclaims
 *   versions     NVStream: Store::put(key, v) took any v.  nvs: a name's versions must
 *                increase (NVS_E_VERSION otherwise)
 *   crash        NVStream: no recovery check, no checksums.  nvs: a snapshot is durable
 *                and whole (all objects or none) when nvs_snapshot returns
 *   delta        NVStream: mprotect only.  nvs: NVS_DELTA=1 (userfaultfd), or mprotect
 * The module in nvs.f90 declares them with iso_c_binding.
 */
#ifndef NVSTREAM_H
#define NVSTREAM_H

#ifdef __cplusplus
extern "C" {
#endif

int   nvs_init(int proc_id);
void *nvs_alloc(unsigned long n, const char *s);
void  nvs_free(void *ptr);
void  nvs_snapshot(int proc_id);
int   nvs_finalize(void);
/* What the last failed call on this thread said; "" after a call that succeeded. */
const char *nvs_last_error(void);
/* Fortran callers (gfortran's trailing underscore, arguments by reference): */
int   nvs_init_(int *proc_id);
void *alloc(unsigned long *n, const char *s);
void *alloc_(unsigned long *n, const char *s); /* alloc, for implicit interfaces */
void  nvs_free_(void *ptr);
void  nvs_snapshot_(int *proc_id);
int   nvs_finalize_(void);

#ifdef __cplusplus
}
#endif

#endif /* NVSTREAM_H */
