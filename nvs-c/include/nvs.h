/* nvs: named, versioned, immutable objects on persistent memory -- the C ABI.
 *
 * Generated from the nvs-c crate by cbindgen; do not edit (see nvs-c/cbindgen.toml).
 *
 * Every call returns NVS_OK (0) or an NVS_E_* status, and on failure leaves a one-line
 * message for nvs_last_error() (per thread). Names are NUL-terminated strings of 1 to
 * 255 bytes. Versions start at 1; NVS_LATEST (0) asks for the latest where a call reads.
 *
 * Threads: an nvs_pool is shared by any number of threads (every call on it is
 * thread-safe). An nvs_lane and an nvs_follower are used by one thread at a time (they
 * may move between threads), except that several threads may get from one follower at
 * once (nvs_follower_get, nvs_follower_get_on); any other call on a follower that would
 * overlap another thread's call on it is NVS_E_BUSY (but no call may start once another
 * thread's nvs_follower_close has begun: it frees the handle).
 * nvs_last_error() and nvs_status_name() are thread-safe.
 *
 * Signals: no call is async-signal-safe. A call made on a thread that is already inside
 * an nvs call (a signal handler that interrupted it: "checkpoint on SIGTERM"), on any
 * handle, returns NVS_E_BUSY at once, without allocating, instead of waiting for ever
 * for a lock its own thread holds (the handle's, or the allocator's); set a flag in the
 * handler and call nvs after it. A callback nvs calls (nvs_names) may call nvs.
 *
 * fork: a child that fork() makes of a process with open pools may read them (gets,
 * nvs_pool_refresh, followers): it takes no lock of its parent's. Its puts, reclaims and
 * lane takes are NVS_E_BUSY with nothing written; its nvs_pool_close and
 * nvs_pool_close_detached write nothing, free the handle and return NVS_OK (whatever the
 * parent's other threads were doing). Where another thread of the parent was inside a
 * call on the pool at the fork, the pool's state is half-changed in the child: calls on
 * it are NVS_E_BUSY at once (open the pool again in the child). Fork with fork(): a child
 * made by a raw clone or syscall(SYS_fork), which runs no atfork handler, is not seen as
 * one.
 *
 * Link with -lnvs (libnvs.so), or libnvs.a plus -lpthread -ldl -lm.
 */

#ifndef NVS_H
#define NVS_H

#include <stddef.h>
#include <stdint.h>

// Success.
#define NVS_OK 0

// A bad argument: a null handle or pointer, a null buffer with a non-zero length, a
// length no buffer can have (above `PTRDIFF_MAX` bytes), an empty name, a lane out of
// range, conflicting fields of an `nvs_object`.
#define NVS_E_ARG 1

// No object of that name, or no such version of it.
#define NVS_E_NOT_FOUND 2

// The caller's buffer is too small; the length it needs was stored where the call
// returns lengths.
#define NVS_E_TOO_SMALL 3

// The pool has no room left (no free segment, no run of them long enough, its index
// is full, or the file system has no space for a sparse pool's next segment).
// Retention (`nvs_reclaim`) frees room.
#define NVS_E_FULL 4

// Larger than the pool allows: an object, a name (255 bytes) or metadata (1 KiB).
#define NVS_E_TOO_LARGE 5

// The pool's bytes are damaged, or the file is not an nvs pool.
#define NVS_E_CORRUPT 6

// Another writer holds the pool, or the lane is taken, or (for calls that need the
// whole pool) lanes taken with `nvs_lane_take` are still held; or another thread is
// inside a call on the handle that this one may not overlap (`nvs_pool_close`, a
// follower's calls but its gets), or this thread is (a signal handler's call).
#define NVS_E_BUSY 7

// The pool is open read-only (or has an older format, readable only).
#define NVS_E_READ_ONLY 8

// A system call failed (open, map, msync...), or the file cannot be a pool.
#define NVS_E_IO 9

// An explicit version not above the name's latest.
#define NVS_E_VERSION 10

// A delta put whose changed ranges are wrong: out of the object, or (with the delta
// check on, `nvs_set_delta_check`) they missed a change.
#define NVS_E_DELTA 11

// A bug in nvs (a Rust panic, caught at the boundary). The handle it happened on must
// not be used again except to close it.
#define NVS_E_PANIC 12

// Anything else (the message says what).
#define NVS_E_OTHER 13

// `nvs_follower_wait` returned a committed object.
#define NVS_EVENT_OBJECT 1

// Every lane that joined the stream (and every expected one) ended its stream, and
// nothing new remains.
#define NVS_EVENT_END_OF_STREAM 2

// No writer holds the pool, a lane was never ended, and nothing new remains: the writer
// died. (A pool no writer has written yet is waited on instead.)
#define NVS_EVENT_WRITER_GONE 3

// Nothing happened before the timeout.
#define NVS_EVENT_TIMEOUT 4

// "The latest version", where a call takes a version to read.
#define NVS_LATEST 0

// Open for writing (one writer process at a time: the pool's writer lock).
#define NVS_OPEN_READ_WRITE 0

// Open read-only: any number of readers, beside a live writer in another process.
#define NVS_OPEN_READ_ONLY 1

// `nvs_pool_open_lane`: the lowest lane no other process is writing.
#define NVS_ANY_LANE UINT32_MAX

// The longest name, in bytes.
#define NVS_NAME_MAX 255

// The most metadata an object carries, in bytes.
#define NVS_META_MAX 1024

// A follower of a pool (opaque). Use it from one thread at a time, but for gets: several
// threads may get from it at once while no other call on it runs (a call that would
// overlap another thread's is `NVS_E_BUSY`, never a race; but no thread may call on it
// once one closes it).
typedef struct nvs_follower nvs_follower;

// One lane taken for writing by one thread (opaque). Use it from one thread at a time
// (it may move between threads); release it before closing its pool.
typedef struct nvs_lane nvs_lane;

// An open pool (opaque). Thread-safe: share it between threads.
typedef struct nvs_pool nvs_pool;

// What `nvs_follower_wait` learnt.
typedef struct nvs_event {
  // `NVS_EVENT_OBJECT`, `NVS_EVENT_END_OF_STREAM`, `NVS_EVENT_WRITER_GONE` or
  // `NVS_EVENT_TIMEOUT`; the other fields are set for `NVS_EVENT_OBJECT` only, but
  // `lane`.
  int32_t kind;
  // The lane that committed the object; for `NVS_EVENT_WRITER_GONE`, the lowest lane
  // whose writer is gone (an MPI rank's lane names the rank that died).
  uint32_t lane;
  // The sequence number (in its lane) of the unit that committed it.
  uint64_t seq;
  // Its version.
  uint64_t version;
  // Its length.
  uint64_t len;
  // The name's length in bytes.
  uint32_t name_len;
  // The name, NUL-terminated.
  char name[256];
} nvs_event;

// How `nvs_pool_create` formats a pool. All zero (or a NULL pointer) means the
// defaults.
typedef struct nvs_create_options {
  // Segment size in bytes (a multiple of 64, 4 KiB to 1 TiB); 0: the default (the
  // largest power of two not above 1/16 of the pool, 4 KiB to 64 MiB).
  uint64_t segment_len;
  // Writer lanes, 1 to 256; 0: 64.
  uint32_t lanes_max;
  // Non-zero: no payload checksums (they are on by default).
  int32_t no_payload_checksum;
  // Non-zero: every lane has names of its own (ranks putting one name each get their
  // own versions); needed for writer processes per lane (`nvs_pool_open_lane`).
  int32_t lane_names;
} nvs_create_options;

// One part of a vectored object.
typedef struct nvs_iovec {
  // The part's bytes (NULL only with `len` 0).
  const void *base;
  // Its length.
  size_t len;
} nvs_iovec;

// A byte range of an object that changed since its parent (delta puts).
typedef struct nvs_range {
  // First byte.
  uint64_t offset;
  // Length in bytes.
  uint64_t len;
} nvs_range;

// One object to put. Zero-initialise it and set what you need: `name`, and either
// `data`/`len` or `parts`/`parts_len`.
typedef struct nvs_object {
  // Its name, NUL-terminated (1 to 255 bytes).
  const char *name;
  // Its bytes (NULL only with `len` 0).
  const void *data;
  // Their length.
  size_t len;
  // Or its bytes in parts, stored one after the other (NULL: use `data`).
  const struct nvs_iovec *parts;
  // How many parts.
  size_t parts_len;
  // An explicit version (above the name's latest); 0: the next one.
  uint64_t version;
  // Metadata stored with it (for example `dtype=<f8\nshape=64,64\n`), NULL: none.
  const void *meta;
  // Its length (at most `NVS_META_MAX`).
  size_t meta_len;
  // Non-zero: a delta put against this version of the name, storing only the ranges
  // in `changes` (nvs stores a full version when a delta would not pay, or when
  // `parent` is not a version of the same length).
  uint64_t parent;
  // The ranges that differ from `parent`, ascending by offset. nvs trusts them: bytes
  // outside them are stored as the parent's, unless the delta check is on
  // (`nvs_set_delta_check`), which refuses a put whose ranges missed a change.
  const struct nvs_range *changes;
  // How many ranges.
  size_t changes_len;
} nvs_object;

// What a put committed.
typedef struct nvs_put_result {
  // The version the object got.
  uint64_t version;
  // Payload bytes written (less than the object's length for a delta).
  uint64_t stored_bytes;
  // 1 if stored as a delta.
  int32_t delta;
} nvs_put_result;

// Facts about one committed version.
typedef struct nvs_object_info {
  // Its version.
  uint64_t version;
  // Its length (what a get returns).
  uint64_t len;
  // Payload bytes on the media (less than `len` for a delta).
  uint64_t stored_bytes;
  // 0 for a full version; for a delta, the deltas between it and its full version.
  uint32_t depth;
  // The lane that committed it.
  uint32_t lane;
  // Bytes of metadata stored with it.
  uint32_t meta_len;
} nvs_object_info;

// Called by `nvs_names` for each name: the name (NUL-terminated; `len` bytes before
// the NUL), its latest version and its number of versions, and the caller's `ctx`.
// Return 0 to go on, anything else to stop. It must return: no `longjmp` out of it
// (undefined behaviour), no C++ exception thrown through it (the process aborts). It
// may call nvs, the pool included (closing it is `NVS_E_BUSY`: this call is inside).
typedef int32_t (*nvs_name_fn)(const char *name,
                               size_t len,
                               uint64_t latest,
                               uint32_t versions,
                               void *ctx);

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The message of the last failed call on this thread (an empty string if none failed
// yet). Valid until the next nvs call on this thread. Thread-safe (per thread).
const char *nvs_last_error(void);

// The name of a status code (`"NVS_E_FULL"`, ...), a static string.
const char *nvs_status_name(int32_t status);

// Follow the pool at `path` (opened read-only; it never writes and takes no lock).
// `only` (NULL: every name) follows one name: an empty one is `NVS_E_ARG`, one longer
// than `NVS_NAME_MAX` `NVS_E_TOO_LARGE` (it would match nothing, for ever). The first
// wait reports every object already committed.
//
// # Safety
// `path` is a NUL-terminated string; `only` is NULL or one; `out` is valid for a write.
int32_t nvs_follower_open(const char *path, const char *only, struct nvs_follower **out);

// Declare a lane the stream has: it ends only once that lane has joined and ended its
// stream too (a writer yet to start cannot be missed). `NVS_E_ARG` for a lane the pool
// does not have (its stream could never end). `NVS_E_BUSY` while another thread is
// inside a call on the follower.
//
// # Safety
// `f` is NULL or a live handle.
int32_t nvs_follower_expect_lane(struct nvs_follower *f, uint32_t lane);

// Wait for the next event: an object (one per call, in lane order), the end of the
// stream, a writer gone, or the timeout. `timeout_ms` < 0 waits as long as it takes;
// 0 looks once. `NVS_E_IO` once the pool file was removed, moved or replaced at its
// path while no writer holds it (no writer could open it again). Versions that
// retention (`nvs_reclaim`, `NVS_KEEP`) released before the follower read them are
// skipped silently: a follower behind a writer that reclaims sees a gap in a name's
// versions, nothing else. `NVS_E_BUSY` while another thread is inside a call on the
// follower; and for as long as this waits (up to `timeout_ms`), other threads' gets
// from it are `NVS_E_BUSY`.
//
// # Safety
// `f` is NULL or a live handle; `ev` is valid for a write.
int32_t nvs_follower_wait(struct nvs_follower *f, int64_t timeout_ms, struct nvs_event *ev);

// `nvs_get` on the follower's view of the pool (as of its last wait). Several threads
// may get from one follower at once; `NVS_E_BUSY` while another thread is inside a call
// on it that is not a get.
//
// # Safety
// `f` is NULL or a live handle; the rest as for `nvs_get`.
int32_t nvs_follower_get(struct nvs_follower *f,
                         const char *name,
                         uint64_t version,
                         void *buf,
                         size_t cap,
                         size_t *len);

// `nvs_get_on` on the follower's view of the pool (as of its last wait): in a pool with
// lane names, where several lanes hold a name (each MPI rank its own `temperature`),
// the event's `lane` says whose version it is. Several threads may get from one
// follower at once; `NVS_E_BUSY` while another thread is inside a call on it that is
// not a get.
//
// # Safety
// `f` is NULL or a live handle; the rest as for `nvs_get`.
int32_t nvs_follower_get_on(struct nvs_follower *f,
                            uint32_t lane,
                            const char *name,
                            uint64_t version,
                            void *buf,
                            size_t cap,
                            size_t *len);

// Stop following and free the handle. NULL is a no-op; `NVS_E_BUSY` while another
// thread is inside a call on it. It does not stop other threads' calls: none may start
// during the close or after it (it would find the handle freed).
//
// # Safety
// `f` is NULL or a live handle, not used again by any thread.
int32_t nvs_follower_close(struct nvs_follower *f);

// Create a pool file of `size` bytes at `path` (refused if it exists) and open it for
// writing; `opts` may be NULL (the defaults). On success `*out` is the new handle.
//
// # Safety
// `path` is a NUL-terminated string; `opts` is NULL or valid; `out` is valid for a
// write.
int32_t nvs_pool_create(const char *path,
                        uint64_t size,
                        const struct nvs_create_options *opts,
                        struct nvs_pool **out);

// `nvs_pool_create` of a sparse pool: the file gets its blocks as segments are
// claimed, not all at create, so a pool holding little takes little (memory on tmpfs)
// and creates at once. A file system that fills refuses the put needing a new segment
// (`NVS_E_FULL`, nothing written), never a signal. Fsdax files get every block anyway.
//
// # Safety
// As `nvs_pool_create`.
int32_t nvs_pool_create_sparse(const char *path,
                               uint64_t size,
                               const struct nvs_create_options *opts,
                               struct nvs_pool **out);

// Open the pool at `path`; `mode` is `NVS_OPEN_READ_WRITE` or `NVS_OPEN_READ_ONLY`.
// Recovery runs: every committed object is there, nothing else.
//
// # Safety
// `path` is a NUL-terminated string; `out` is valid for a write.
int32_t nvs_pool_open(const char *path, int32_t mode, struct nvs_pool **out);

// Open the pool at `path` to write lane `lane` (`NVS_ANY_LANE`: the lowest lane no
// other process is writing) beside writer processes of its other lanes — an MPI rank
// per lane. The pool must have lane names (created with `lane_names`; else `NVS_E_ARG`);
// a lane another live process writes is `NVS_E_BUSY`; a lane whose writer died is taken
// over where it ended. Puts to other lanes are refused; reads see the other writers'
// objects as of the open or the last `nvs_pool_refresh`. `nvs_pool_owned_lane` tells
// which lane was taken.
//
// # Safety
// `path` is a NUL-terminated string; `out` is valid for a write.
int32_t nvs_pool_open_lane(const char *path, uint32_t lane, struct nvs_pool **out);

// The lane a pool opened by `nvs_pool_open_lane` writes, into `*lane`; `NVS_E_ARG` for
// a pool opened otherwise (which writes every lane, or none).
//
// # Safety
// `pool` is NULL or a live handle; `lane` is valid for a write.
int32_t nvs_pool_owned_lane(const struct nvs_pool *pool, uint32_t *lane);

// Close the pool: end the stream of every lane that joined it (followers see the end
// of stream), unmap, unlock, free the handle. `NVS_E_BUSY` (and the pool stays open)
// while lane handles are held, or while another thread is inside a call on the pool.
// NULL is a no-op. No thread may make a call on the pool after it is closed. In a child
// that `fork` made of the writer, closing writes nothing (the streams stay the parent's;
// the child's puts are refused with `NVS_E_BUSY`). Any other error still closes the
// pool and frees the handle: a lane whose stream cannot be ended (`NVS_E_FULL`: its
// segment filled to the last byte, none free) keeps its objects, the other lanes' streams
// are ended, and the first error is returned.
//
// # Safety
// `pool` is NULL or a live handle, not used again unless the close returned
// `NVS_E_BUSY`.
int32_t nvs_pool_close(struct nvs_pool *pool);

// Close the pool without ending its streams: each lane that joined gets a detach
// marker, so followers know this writer ended cleanly and wait for the next one (a
// writer that restarts appends after the last committed version). Otherwise as
// `nvs_pool_close`.
//
// # Safety
// As `nvs_pool_close`.
int32_t nvs_pool_close_detached(struct nvs_pool *pool);

// Catch up with the writers: of a pool opened read-only, or, of a pool opened for a lane
// (`nvs_pool_open_lane`), with the other lanes' writer processes. Reads only what was
// committed since the last refresh, or recovers again when it cannot be sure that is
// right.
// `NVS_E_BUSY` while lane handles are held.
//
// # Safety
// `pool` is NULL or a live handle.
int32_t nvs_pool_refresh(struct nvs_pool *pool);

// Take `lane` for writing from this thread: threads each holding their own lane put
// side by side with no lock. `NVS_E_BUSY` if the lane is held already.
//
// # Safety
// `pool` is NULL or a live handle; `out` is valid for a write.
int32_t nvs_lane_take(struct nvs_pool *pool, uint32_t lane, struct nvs_lane **out);

// Give the lane back (its stream goes on: `nvs_lane_end_stream` ends it) and free the
// handle. NULL is a no-op.
//
// # Safety
// `lane` is NULL or a live handle, not used again.
int32_t nvs_lane_release(struct nvs_lane *lane);

// Put `len` bytes at `data` as the next version of `name` on `lane`; `*version` (if
// not NULL) gets its version. Returns once the put is durable.
//
// # Safety
// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `data` is NULL
// or valid for `len` bytes; `version` is NULL or valid for a write.
int32_t nvs_put(struct nvs_pool *pool,
                uint32_t lane,
                const char *name,
                const void *data,
                size_t len,
                uint64_t *version);

// Put one object described by `obj` (vectored, explicit version, metadata, delta) on
// `lane`; `*result` (if not NULL) says what was committed.
//
// # Safety
// `pool` is NULL or a live handle; `obj` is valid, and its pointers are NULL or valid
// for their lengths; `result` is NULL or valid for a write.
int32_t nvs_put_object(struct nvs_pool *pool,
                       uint32_t lane,
                       const struct nvs_object *obj,
                       struct nvs_put_result *result);

// Commit the `n` objects at `objs` together on `lane`, in one unit: after a crash all
// of them or none are there. Any number of objects from 1, up to what the pool holds.
// `versions` (if not NULL) gets their `n` versions, in order. A refusal of one object
// (its name, metadata, version, size, delta, or its fields) returns that error's
// status, and `nvs_last_error` names the object by its index in `objs`: `object 2 of
// the batch: empty name`. Nothing is committed on any error.
//
// # Safety
// `pool` is NULL or a live handle; `objs` is valid for `n` objects (each as for
// `nvs_put_object`); `versions` is NULL or valid for `n` writes.
int32_t nvs_put_batch(struct nvs_pool *pool,
                      uint32_t lane,
                      const struct nvs_object *objs,
                      size_t n,
                      uint64_t *versions);

// End `lane`'s stream: followers see its end of stream (a later put reopens it).
//
// # Safety
// `pool` is NULL or a live handle.
int32_t nvs_end_stream(struct nvs_pool *pool, uint32_t lane);

// `nvs_put` on a lane handle.
//
// # Safety
// `lane` is NULL or a live handle; the rest as for `nvs_put`.
int32_t nvs_lane_put(struct nvs_lane *lane,
                     const char *name,
                     const void *data,
                     size_t len,
                     uint64_t *version);

// `nvs_put_object` on a lane handle.
//
// # Safety
// `lane` is NULL or a live handle; the rest as for `nvs_put_object`.
int32_t nvs_lane_put_object(struct nvs_lane *lane,
                            const struct nvs_object *obj,
                            struct nvs_put_result *result);

// `nvs_put_batch` on a lane handle.
//
// # Safety
// `lane` is NULL or a live handle; the rest as for `nvs_put_batch`.
int32_t nvs_lane_put_batch(struct nvs_lane *lane,
                           const struct nvs_object *objs,
                           size_t n,
                           uint64_t *versions);

// End the lane's stream (the handle stays taken; release it after).
//
// # Safety
// `lane` is NULL or a live handle.
int32_t nvs_lane_end_stream(struct nvs_lane *lane);

// Copy version `version` of lane `lane`'s `name` (`NVS_LATEST`: its latest) into `buf`
// of `cap` bytes; `*len` the object's length (size query and `NVS_E_TOO_SMALL` as for
// `nvs_get`). In a pool with lane names, the name in that lane's name space (rank r's
// `temperature`); otherwise the version only if that lane wrote it.
//
// # Safety
// As `nvs_get`.
int32_t nvs_get_on(const struct nvs_pool *pool,
                   uint32_t lane,
                   const char *name,
                   uint64_t version,
                   void *buf,
                   size_t cap,
                   size_t *len);

// The latest version of lane `lane`'s `name` (see `nvs_get_on`).
//
// # Safety
// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `version` is
// valid for a write.
int32_t nvs_latest_on(const struct nvs_pool *pool,
                      uint32_t lane,
                      const char *name,
                      uint64_t *version);

// Copy version `version` of `name` (`NVS_LATEST`: the latest) into `buf`, which holds
// `cap` bytes; `*len` gets the object's length. A size query: `buf` NULL and `cap` 0
// store the length and return `NVS_OK`. A buffer too small: `NVS_E_TOO_SMALL`, `*len`
// the length it needs.
//
// # Safety
// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `buf` is NULL or
// valid for `cap` bytes; `len` is NULL or valid for a write.
int32_t nvs_get(const struct nvs_pool *pool,
                const char *name,
                uint64_t version,
                void *buf,
                size_t cap,
                size_t *len);

// The metadata stored with version `version` of `name` (`NVS_LATEST`: the latest),
// into `buf` of `cap` bytes; `*len` its length. Size query and `NVS_E_TOO_SMALL` as
// for `nvs_get`.
//
// # Safety
// As `nvs_get`.
int32_t nvs_get_meta(const struct nvs_pool *pool,
                     const char *name,
                     uint64_t version,
                     void *buf,
                     size_t cap,
                     size_t *len);

// Facts about version `version` of `name` (`NVS_LATEST`: the latest).
//
// # Safety
// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `info` is valid
// for a write.
int32_t nvs_stat(const struct nvs_pool *pool,
                 const char *name,
                 uint64_t version,
                 struct nvs_object_info *info);

// The latest version of `name`.
//
// # Safety
// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `version` is
// valid for a write.
int32_t nvs_latest(const struct nvs_pool *pool, const char *name, uint64_t *version);

// The versions of `name`, ascending, into `out` (room for `cap`); `*count` gets how
// many there are. A size query: `out` NULL and `cap` 0. Room for fewer:
// `NVS_E_TOO_SMALL`, the first `cap` stored.
//
// # Safety
// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `out` is NULL
// or valid for `cap` writes; `count` is valid for a write.
int32_t nvs_versions(const struct nvs_pool *pool,
                     const char *name,
                     uint64_t *out,
                     size_t cap,
                     size_t *count);

// Call `cb` for each name in the pool, in no particular order. The names are taken
// when the call starts; `cb` may call nvs (the pool included). In a pool with lane
// names a name is listed once per lane that has it (each with that lane's latest
// version and count): `nvs_names_on` lists one lane's.
//
// # Safety
// `pool` is NULL or a live handle; `cb` is a valid function; `ctx` is passed through.
int32_t nvs_names(const struct nvs_pool *pool, nvs_name_fn cb, void *ctx);

// `nvs_names` for lane `lane`'s names: in a pool with lane names, the names of that
// lane's name space (rank r's); otherwise the names `lane` wrote a version of (with
// the name's latest version and count, of every lane).
//
// # Safety
// As `nvs_names`.
int32_t nvs_names_on(const struct nvs_pool *pool, uint32_t lane, nvs_name_fn cb, void *ctx);

// Check every delta put on this pool (`nvs_object::parent`, and lane handles' puts)
// against its parent before anything is written: `on` non-zero refuses a put whose
// `changes` missed a change with `NVS_E_DELTA`; 0 trusts them (bytes outside the ranges
// are stored as the parent's). The check reads the parent, a get per delta put. Off by
// default in release builds of nvs, on in debug builds. `NVS_E_BUSY` while lane handles
// are held.
//
// # Safety
// `pool` is NULL or a live handle.
int32_t nvs_set_delta_check(struct nvs_pool *pool, int32_t on);

// Retention: release the oldest segments whose objects all have at least `keep` newer
// versions; `*freed` (if not NULL) gets how many segments were freed. `NVS_E_BUSY`
// while lane handles are held.
//
// # Safety
// `pool` is NULL or a live handle; `freed` is NULL or valid for a write.
int32_t nvs_reclaim(struct nvs_pool *pool, uint32_t keep, uint32_t *freed);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* NVS_H */
