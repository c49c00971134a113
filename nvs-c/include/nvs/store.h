/* NVStream's C++ Store API (nvs/store.h), over libnvs, so that NVStream's readers and
 * writers (its microbenchmarks' seq_reader, pseq_reader, parallel_reader, seq_writer...)
 * compile and run unchanged: include <nvs/store.h> and <nvs/store_manager.h> with
 * -I nvs-c/include, link with -lnvs. Header-only C++11 over nvs.h.
 *
 * nvs::StoreManager::GetInstance(id) gives the process's store for `id` ("gtc_store/3":
 * a name and a rank). Its pool is $NVS_DIR/<name>.<rank>.pool (NVS_DIR defaults to
 * /dev/shm); NVS_NAME, when set, stands for the name, as it does for the NVStream wrapper
 * (nvstream.h), whose rank r writes $NVS_DIR/$NVS_NAME.r.pool (NVS_NAME defaults to nvs):
 * a reader of what a wrapper-instrumented app wrote sets the same NVS_NAME. An id with no
 * '/' is the pool <name>.pool. The store reads the pool read-only (beside a live writer:
 * a get that finds nothing refreshes once and looks again) and opens it for writing at its
 * first write (create_obj, put, put_all), creating it with NVS_POOL_SIZE bytes (default
 * 256M) if it is missing.
 *
 * Objects: create_obj(key, size, &addr) gives zeroed memory for `size` bytes registered
 * under `key` (DUPLICATE_KEY if it is registered already); put(key, version) stores the
 * object's bytes as that version (versions of a name must increase: NVStream accepted
 * any); put_all() stores every registered object as one batch, one commit, the next
 * version of each, and returns the bytes stored (or PMEM_ERROR); free_obj(addr)
 * unregisters and frees. get(key, version, addr) copies the object into `addr`, which
 * must hold it (NVStream's contract; its length is what nvs_stat says); get_with_malloc
 * allocates the memory with malloc (the caller frees it). A missing object is
 * ID_NOT_FOUND, any other failure OPEN_FAILED or PMEM_ERROR, with nvs_last_error()
 * saying what. stats() prints what the store did on stdout.
 *
 * Differences from NVStream that remain are listed in nvstream.h. */
#ifndef NVS_COMPAT_STORE_H
#define NVS_COMPAT_STORE_H

#include <cstdint>
#include <string>

#include "errorCode.h"

namespace nvs {
class Store {
 public:
  virtual ~Store() {}
  virtual ErrorCode create_obj(std::string key, uint64_t size, void **addr) = 0;
  virtual ErrorCode free_obj(void *obj_addr) = 0;
  virtual uint64_t put(std::string key, uint64_t version) = 0;
  virtual uint64_t put_all() = 0;
  virtual ErrorCode get(std::string key, uint64_t version, void *addr) = 0;
  /* returns object. Runtime allocates the memory for returned object */
  virtual ErrorCode get_with_malloc(std::string key, uint64_t version, void **addr) = 0;
  virtual std::string get_store_id() = 0;
  virtual void stats() = 0;
};
}

#endif
