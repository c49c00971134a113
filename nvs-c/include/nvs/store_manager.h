/* NVStream's StoreManager (nvs/store_manager.h), over libnvs: see store.h. */
#ifndef NVS_COMPAT_STORE_MANAGER_H
#define NVS_COMPAT_STORE_MANAGER_H

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../nvs.h"
#include "store.h"

namespace nvs {

/* The Store of one pool, over nvs.h (see store.h). */
class PoolStore : public Store {
 public:
  explicit PoolStore(const std::string &id) : id_(id), pool_(NULL), writable_(false) {
    path_ = path_of(id);
    /* Read-only when it exists (no lock: a live writer may go on); written from the first
     * write on. */
    if (nvs_pool_open(path_.c_str(), NVS_OPEN_READ_ONLY, &pool_) != NVS_OK) pool_ = NULL;
  }

  ~PoolStore() {
    for (std::map<std::string, Obj>::iterator it = objs_.begin(); it != objs_.end(); ++it) std::free(it->second.ptr);
    if (pool_ != NULL) nvs_pool_close_detached(pool_);
  }

  ErrorCode create_obj(std::string key, uint64_t size, void **addr) {
    if (addr == NULL || key.empty()) return ELEM_NOT_FOUND;
    if (objs_.count(key) != 0) return DUPLICATE_KEY;
    if (!writable()) return OPEN_FAILED;
    void *p = NULL;
    size_t bytes = size == 0 ? 1 : (size_t)size;
    if (posix_memalign(&p, 64, bytes) != 0) return NOT_ENOUGH_SPACE;
    std::memset(p, 0, bytes);
    Obj o = {p, size};
    objs_[key] = o;
    by_addr_[p] = key;
    *addr = p;
    return NO_ERROR;
  }

  ErrorCode free_obj(void *obj_addr) {
    std::map<void *, std::string>::iterator a = by_addr_.find(obj_addr);
    if (a == by_addr_.end()) return ELEM_NOT_FOUND;
    objs_.erase(a->second);
    by_addr_.erase(a);
    std::free(obj_addr);
    return NO_ERROR;
  }

  uint64_t put(std::string key, uint64_t version) {
    std::map<std::string, Obj>::iterator it = objs_.find(key);
    if (it == objs_.end()) return ELEM_NOT_FOUND;
    if (!writable()) return OPEN_FAILED;
    nvs_object o;
    std::memset(&o, 0, sizeof o);
    o.name = key.c_str();
    o.data = it->second.ptr;
    o.len = (size_t)it->second.size;
    o.version = version;
    if (nvs_put_object(pool_, 0, &o, NULL) != NVS_OK) return said(PMEM_ERROR);
    puts_++;
    bytes_ += it->second.size;
    return NO_ERROR;
  }

  uint64_t put_all() {
    if (objs_.empty()) return 0;
    if (!writable()) return OPEN_FAILED;
    std::vector<nvs_object> batch(objs_.size());
    uint64_t total = 0;
    size_t i = 0;
    for (std::map<std::string, Obj>::iterator it = objs_.begin(); it != objs_.end(); ++it, ++i) {
      std::memset(&batch[i], 0, sizeof batch[i]);
      batch[i].name = it->first.c_str();
      batch[i].data = it->second.ptr;
      batch[i].len = (size_t)it->second.size;
      total += it->second.size;
    }
    if (nvs_put_batch(pool_, 0, &batch[0], batch.size(), NULL) != NVS_OK) return said(PMEM_ERROR);
    puts_ += batch.size();
    bytes_ += total;
    return total;
  }

  ErrorCode get(std::string key, uint64_t version, void *addr) {
    size_t len = 0;
    ErrorCode e = length(key, version, &len);
    if (e != NO_ERROR) return e;
    if (addr == NULL && len != 0) return ELEM_NOT_FOUND;
    return fetch(key, version, addr, len);
  }

  ErrorCode get_with_malloc(std::string key, uint64_t version, void **addr) {
    if (addr == NULL) return ELEM_NOT_FOUND;
    size_t len = 0;
    ErrorCode e = length(key, version, &len);
    if (e != NO_ERROR) return e;
    void *p = std::malloc(len == 0 ? 1 : len);
    if (p == NULL) return NOT_ENOUGH_SPACE;
    e = fetch(key, version, p, len);
    if (e != NO_ERROR) {
      std::free(p);
      return e;
    }
    *addr = p;
    return NO_ERROR;
  }

  std::string get_store_id() { return id_; }

  void stats() {
    std::printf("nvs store %s (%s): %zu objects registered, %llu puts (%llu bytes), %llu gets (%llu bytes)\n",
                id_.c_str(), path_.c_str(), objs_.size(), (unsigned long long)puts_, (unsigned long long)bytes_,
                (unsigned long long)gets_, (unsigned long long)got_);
  }

  /* $NVS_DIR/<name>.<rank>.pool for "name/rank" (NVS_NAME, when set, for the name). */
  static std::string path_of(const std::string &id) {
    const char *dir = std::getenv("NVS_DIR");
    const char *env_name = std::getenv("NVS_NAME");
    std::string::size_type slash = id.rfind('/');
    std::string name = slash == std::string::npos ? id : id.substr(0, slash);
    if (env_name != NULL && *env_name != 0) name = env_name;
    std::string file = slash == std::string::npos ? name : name + "." + id.substr(slash + 1);
    return std::string(dir != NULL && *dir != 0 ? dir : "/dev/shm") + "/" + file + ".pool";
  }

 private:
  struct Obj {
    void *ptr;
    uint64_t size;
  };

  /* Open for writing (creating the pool if missing), once. */
  bool writable() {
    if (writable_) return true;
    if (pool_ != NULL) {
      nvs_pool_close(pool_);
      pool_ = NULL;
    }
    int rc = nvs_pool_open(path_.c_str(), NVS_OPEN_READ_WRITE, &pool_);
    if (rc == NVS_E_IO && !exists(path_)) {
      const char *size_s = std::getenv("NVS_POOL_SIZE");
      uint64_t size = parse_size(size_s != NULL && *size_s != 0 ? size_s : "256M");
      rc = size == 0 ? NVS_E_ARG : nvs_pool_create(path_.c_str(), size, NULL, &pool_);
    }
    if (rc != NVS_OK) {
      std::fprintf(stderr, "nvs: store %s: %s\n", id_.c_str(), nvs_last_error());
      pool_ = NULL;
      return false;
    }
    writable_ = true;
    return true;
  }

  static bool exists(const std::string &path) {
    std::FILE *f = std::fopen(path.c_str(), "r");
    if (f != NULL) std::fclose(f);
    return f != NULL;
  }

  static uint64_t parse_size(const char *s) {
    char *end = NULL;
    unsigned long long n = std::strtoull(s, &end, 10);
    switch (end != NULL ? *end : 0) {
      case 'k': case 'K': return n << 10;
      case 'm': case 'M': return n << 20;
      case 'g': case 'G': return n << 30;
      case 0: return n;
      default: return 0;
    }
  }

  /* The object's length; a reader beside a live writer refreshes once if it finds none. */
  ErrorCode length(const std::string &key, uint64_t version, size_t *len) {
    if (pool_ == NULL && nvs_pool_open(path_.c_str(), NVS_OPEN_READ_ONLY, &pool_) != NVS_OK) {
      pool_ = NULL;
      if (!said_missing_) /* once: a reader that does not check its gets still learns why */
        std::fprintf(stderr, "nvs: store %s: no pool at %s (%s): a rank's pool is $NVS_DIR/<name>.<rank>.pool, "
                     "NVS_NAME standing for the name; set it as the writer did\n",
                     id_.c_str(), path_.c_str(), nvs_last_error());
      said_missing_ = true;
      return STORE_NOT_FOUND;
    }
    int rc = nvs_get(pool_, key.c_str(), version, NULL, 0, len);
    if (rc == NVS_E_NOT_FOUND && !writable_ && nvs_pool_refresh(pool_) == NVS_OK)
      rc = nvs_get(pool_, key.c_str(), version, NULL, 0, len);
    if (rc == NVS_E_NOT_FOUND) return ID_NOT_FOUND;
    return rc == NVS_OK ? NO_ERROR : said(PMEM_ERROR);
  }

  ErrorCode fetch(const std::string &key, uint64_t version, void *addr, size_t len) {
    size_t n = 0;
    int rc = nvs_get(pool_, key.c_str(), version, addr, len, &n);
    if (rc == NVS_E_NOT_FOUND) return ID_NOT_FOUND; /* released meanwhile */
    if (rc != NVS_OK) return said(PMEM_ERROR);
    gets_++;
    got_ += n;
    return NO_ERROR;
  }

  ErrorCode said(ErrorCode e) {
    std::fprintf(stderr, "nvs: store %s: %s\n", id_.c_str(), nvs_last_error());
    return e;
  }

  std::string id_, path_;
  nvs_pool *pool_;
  bool writable_;
  bool said_missing_ = false;
  std::map<std::string, Obj> objs_;
  std::map<void *, std::string> by_addr_;
  uint64_t puts_ = 0, bytes_ = 0, gets_ = 0, got_ = 0;
};

class StoreManager {
 public:
  /* The process's store for `id` (one per id, made at the first call; at exit its
   * objects are freed and its pool closed, detached: a writer that may run again). */
  static Store *GetInstance(std::string storePath) {
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<PoolStore> > stores;
    std::lock_guard<std::mutex> lock(mutex);
    std::unique_ptr<PoolStore> &s = stores[storePath];
    if (!s) s.reset(new PoolStore(storePath));
    return s.get();
  }

 private:
  StoreManager();
  ~StoreManager();
};

}

#endif
