// NVStream's C++ Store API (nvs/store.h, nvs/store_manager.h, nvs/log.h) over libnvs,
// used as NVStream's microbenchmarks use it. argv[1]: a scratch directory (NVS_DIR);
// argv[2]: the step, each run as a process of its own, in this order:
//   seq_writer   seq_writer.cc's shape: two objects of 3 row pointers and 3x4 doubles,
//                explicit versions 1..4 alternating, one freed, then put_all
//   seq_reader   seq_reader.cc's shape: get_with_malloc("var3", 3) and the values; and
//                every version the writer stored, byte-exact; missing ones ID_NOT_FOUND
//   wrapper      a rank instrumented with nvstream.h (nvs_init(2), two objects, 4 snapshots)
//   pseq_reader  pseq_reader.cc's shape, reading the wrapper's rank 2 through the Store
//                ("gtc_store/2", NVS_NAME=nvs: the wrapper's pools), every version exact
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nvs/log.h"
#include "nvs/store.h"
#include "nvs/store_manager.h"
#include "nvstream.h"

#define CHECK(c)                                                                            \
  do {                                                                                      \
    if (!(c)) {                                                                             \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #c, nvs_last_error()); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

static const int row = 3, column = 4;
static const uint64_t size = row * sizeof(double *) + row * column * sizeof(double);

static void init_data(double **var, double base) {
  double *const data = (double *)(var + row);
  for (int i = 0; i < row; i++) var[i] = data + i * column;
  for (int i = 0; i < row; i++)
    for (int j = 0; j < column; j++) var[i][j] = base + i * column + (j + 1);
}

static void check_values(void *ptr, double base) {
  const double *data = (const double *)((double **)ptr + row);
  for (int k = 0; k < row * column; k++) CHECK(data[k] == base + k + 1);
}

static int seq_writer() {
  nvs::init_log(nvs::SeverityLevel::all, "");
  nvs::Store *st = nvs::StoreManager::GetInstance("seq_store/0");
  CHECK(st == nvs::StoreManager::GetInstance("seq_store/0"));
  void *ptr1, *ptr2;
  CHECK(st->create_obj("var3", size, &ptr1) == nvs::NO_ERROR);
  CHECK(st->create_obj("var3", size, &ptr2) == nvs::DUPLICATE_KEY);
  CHECK(st->create_obj("var4", size, &ptr2) == nvs::NO_ERROR);
  uint64_t version = 0;
  for (int round = 0; round < 2; round++) {
    init_data((double **)ptr1, 100.0 * (version + 1));
    CHECK(st->put("var3", ++version) == nvs::NO_ERROR);
    init_data((double **)ptr2, 100.0 * (version + 1));
    CHECK(st->put("var4", ++version) == nvs::NO_ERROR);
  }
  CHECK(st->put("nothing", 9) == nvs::ELEM_NOT_FOUND);
  CHECK(st->free_obj(ptr1) == nvs::NO_ERROR);
  CHECK(st->free_obj(ptr1) == nvs::ELEM_NOT_FOUND);
  init_data((double **)ptr2, 500.0);
  CHECK(st->put_all() == size); /* var4 alone, its next version: 5 */
  st->stats();
  return 0;
}

static int seq_reader() {
  nvs::Store *st = nvs::StoreManager::GetInstance("seq_store/0");
  CHECK(st->get_store_id() == "seq_store/0");
  void *ptr = std::malloc(size);
  void *mine = ptr; /* seq_reader's own malloc, which get_with_malloc replaces (it leaks it) */
  nvs::ErrorCode ret = st->get_with_malloc("var3", 3, &ptr);
  CHECK(ret == nvs::NO_ERROR && ptr != mine);
  std::free(mine);
  check_values(ptr, 300.0);
  std::free(ptr);
  // Every version stored: var3 1 and 3, var4 2, 4 and 5 (put_all); into the caller's memory.
  const struct {
    const char *key;
    uint64_t version;
    double base;
  } stored[] = {{"var3", 1, 100}, {"var3", 3, 300}, {"var4", 2, 200}, {"var4", 4, 400}, {"var4", 5, 500}};
  static char buf[size];
  for (const auto &s : stored) {
    CHECK(st->get(s.key, s.version, buf) == nvs::NO_ERROR);
    check_values(buf, s.base);
  }
  CHECK(st->get("var3", 2, buf) == nvs::ID_NOT_FOUND);
  CHECK(st->get("var9", 1, buf) == nvs::ID_NOT_FOUND);
  st->stats();
  std::printf("store: seq_writer's objects read back by seq_reader, every version exact\n");
  return 0;
}

static int wrapper() {
  CHECK(nvs_init(2) == 0);
  double *phi = (double *)nvs_alloc(1000 * sizeof(double), "phi");
  int *zion = (int *)nvs_alloc(5000 * sizeof(int), "zion");
  CHECK(phi != NULL && zion != NULL);
  for (int step = 1; step <= 4; step++) {
    for (int i = 0; i < 1000; i++) phi[i] = step * 1e4 + i;
    for (int i = 0; i < 5000; i++) zion[i] = step * 7 + i;
    nvs_snapshot(2);
    CHECK(*nvs_last_error() == 0);
  }
  CHECK(nvs_finalize() == 0);
  return 0;
}

static int pseq_reader() {
  nvs::Store *st = nvs::StoreManager::GetInstance(std::string("gtc_store") + "/" + "2");
  void *dataPtr;
  for (int v = 1; v <= 4; v++) {
    CHECK(st->get_with_malloc("phi", v, &dataPtr) == nvs::NO_ERROR);
    for (int i = 0; i < 1000; i++) CHECK(((double *)dataPtr)[i] == v * 1e4 + i);
    std::free(dataPtr);
    CHECK(st->get_with_malloc("zion", v, &dataPtr) == nvs::NO_ERROR);
    for (int i = 0; i < 5000; i++) CHECK(((int *)dataPtr)[i] == v * 7 + i);
    std::free(dataPtr);
  }
  CHECK(st->get_with_malloc("phi", 5, &dataPtr) == nvs::ID_NOT_FOUND);
  st->stats();
  std::printf("store: the wrapper's rank 2 read back through the Store API, 4 versions of 2 objects exact\n");
  return 0;
}

int main(int argc, char **argv) {
  CHECK(argc == 3);
  CHECK(setenv("NVS_DIR", argv[1], 1) == 0 && setenv("NVS_POOL_SIZE", "16M", 1) == 0);
  std::string step = argv[2];
  if (step == "seq_writer") return seq_writer();
  if (step == "seq_reader") return seq_reader();
  if (step == "wrapper") return wrapper();
  if (step == "pseq_reader") {
    CHECK(setenv("NVS_NAME", "nvs", 1) == 0); /* the wrapper's pools */
    return pseq_reader();
  }
  return 2;
}
