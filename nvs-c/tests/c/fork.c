/* A child that fork made of a writer reads, and changes nothing of its parent's.
 * argv[1]: a scratch directory; argv[2]: which check.
 *
 * "refresh": a pool with lane names and 4 KiB segments, two writer processes on lanes 0
 * and 1 (nvs_pool_open_lane), PUTS small puts each; writer 0 forks a child that refreshes
 * and reads its parent's handle in a loop, and whose puts, snapshots (batches) and
 * reclaims are refused (NVS_E_BUSY). A child's refresh used to take and drop the claim lock through its
 * parent's open file description, releasing the parent's lock mid-claim: the other writer
 * claimed the same segment and the pool no longer opened. Then the pool opens for writing
 * and every version of both lanes is byte-exact.
 *
 * "close": a child's nvs_pool_close_detached and nvs_pool_close of the parent's handles
 * return NVS_OK and write nothing (close_detached used to free the handle and then return
 * NVS_E_BUSY, inviting a retry on freed memory); the parent goes on putting, its streams
 * open.
 *
 * "thread": a thread puts 4 MiB objects in a loop while the main thread forks ten
 * children; a child whose parent's thread was inside the put at the fork finds the
 * pool's lock taken for ever: its get is NVS_E_BUSY at once, naming the fork (it used to
 * hang), else the bytes; its close is NVS_OK either way (it used to be NVS_E_BUSY).
 *
 * "threads": a process that has called nvs (an alloc before any nvs_init) forks; in the
 * child, 4 threads alloc and free at once, and none is refused: the lock was free at the
 * fork, so the child's threads wait for each other as usual (every call in a child used
 * to try the lock once, and a sibling's call made it NULL and NVS_E_BUSY, naming a fork).
 *
 * "delta" (NVS_DELTA=1 or mprotect as argv[3]): snapshot 1 is all 'A'; the parent writes
 * page 0 = 'B' and forks; the child's nvs_snapshot is refused; the parent writes page 5
 * = 'C' and snapshots: version 2 holds 'B' in page 0 and 'C' in page 5. The child's
 * refused snapshot used to scan (and re-arm) the parent's pages through the parent's
 * pagemap descriptor, so version 2 kept 'A' in page 0. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "nvstream.h"

#define PUTS 30000

static void fill(uint8_t *buf, size_t len, uint32_t lane, uint64_t v) {
  for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(i * 7 + v * 13 + lane * 101);
}

static size_t len_of(uint64_t v) { return 8 + (size_t)(v * 37 % 200); }

static void put_all(struct nvs_pool *p, uint32_t lane) {
  uint8_t buf[256];
  for (uint64_t v = 1; v <= PUTS; v++) {
    size_t len = len_of(v);
    fill(buf, len, lane, v);
    uint64_t got = 0;
    OK(nvs_put(p, lane, "x", buf, len, &got));
    CHECK(got == v);
  }
}

/* The fork child of writer 0: refresh and read until the parent ends it. */
static int refresher(struct nvs_pool *p) {
  uint8_t buf[256];
  for (long i = 0;; i++) {
    OK(nvs_pool_refresh(p));
    uint64_t latest = 0;
    int rc = nvs_latest_on(p, 1, "x", &latest);
    CHECK(rc == NVS_OK || rc == NVS_E_NOT_FOUND);
    if (rc == NVS_OK) {
      size_t n = 0;
      uint8_t want[256];
      OK(nvs_get_on(p, 1, "x", latest, buf, sizeof buf, &n));
      fill(want, len_of(latest), 1, latest);
      CHECK(n == len_of(latest) && memcmp(buf, want, n) == 0);
    }
    if (i % 64 == 0) {
      uint64_t v = 0;
      IS(NVS_E_BUSY, nvs_put(p, 0, "x", "child", 5, &v));
      struct nvs_object snap[2] = {{0}, {0}};
      snap[0].name = "x";
      snap[1].name = "y";
      snap[0].data = snap[1].data = "child";
      snap[0].len = snap[1].len = 5;
      IS(NVS_E_BUSY, nvs_put_batch(p, 0, snap, 2, NULL));
      IS(NVS_E_BUSY, nvs_reclaim(p, 1, NULL));
    }
  }
}

static int refresh_check(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/fork.pool", dir);
  struct nvs_create_options o = {0};
  o.segment_len = 4096;
  o.lanes_max = 2;
  o.lane_names = 1;
  struct nvs_pool *p = NULL;
  OK(nvs_pool_create(path, 64 << 20, &o, &p));
  OK(nvs_pool_close(p));

  pid_t other = fork();
  CHECK(other >= 0);
  if (other == 0) {
    OK(nvs_pool_open_lane(path, 1, &p));
    put_all(p, 1);
    OK(nvs_pool_close(p));
    _exit(0);
  }
  OK(nvs_pool_open_lane(path, 0, &p));
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) _exit(refresher(p));
  put_all(p, 0);
  OK(nvs_pool_close(p));
  int st = 0;
  CHECK(waitpid(other, &st, 0) == other && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* The child refreshes until now: it must still be alive (no failed check). */
  CHECK(waitpid(child, &st, WNOHANG) == 0);
  CHECK(kill(child, SIGKILL) == 0);
  CHECK(waitpid(child, &st, 0) == child && WIFSIGNALED(st));

  OK(nvs_pool_open(path, NVS_OPEN_READ_WRITE, &p));
  uint8_t want[256], got[256];
  for (uint32_t lane = 0; lane < 2; lane++) {
    for (uint64_t v = 1; v <= PUTS; v++) {
      size_t n = 0, len = len_of(v);
      fill(want, len, lane, v);
      OK(nvs_get_on(p, lane, "x", v, got, sizeof got, &n));
      CHECK(n == len && memcmp(want, got, len) == 0);
    }
  }
  OK(nvs_pool_close(p));
  printf("fork refresh: 2 writer processes x %d puts beside a refreshing fork child, all read back\n", PUTS);
  return 0;
}

static int close_check(const char *dir) {
  char path[4096], lanes[4096];
  snprintf(path, sizeof path, "%s/close.pool", dir);
  snprintf(lanes, sizeof lanes, "%s/lanes.pool", dir);
  struct nvs_pool *p = NULL, *l = NULL;
  OK(nvs_pool_create(path, 4 << 20, NULL, &p));
  struct nvs_create_options o = {0};
  o.lane_names = 1;
  OK(nvs_pool_create(lanes, 4 << 20, &o, &l));
  OK(nvs_pool_close(l));
  OK(nvs_pool_open_lane(lanes, 0, &l));
  uint64_t v = 0;
  OK(nvs_put(p, 0, "a", "1", 1, &v));
  OK(nvs_put(l, 0, "a", "1", 1, &v));
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    OK(nvs_pool_close_detached(p));
    OK(nvs_pool_close(l));
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* The parent's streams are open and its locks held: it goes on. */
  OK(nvs_put(p, 0, "a", "2", 1, &v));
  CHECK(v == 2);
  OK(nvs_put(l, 0, "a", "2", 1, &v));
  CHECK(v == 2);
  struct nvs_pool *q = NULL;
  IS(NVS_E_BUSY, nvs_pool_open(path, NVS_OPEN_READ_WRITE, &q));
  IS(NVS_E_BUSY, nvs_pool_open_lane(lanes, 0, &q));
  OK(nvs_pool_close(p));
  OK(nvs_pool_close(l));
  printf("fork close: a child's close and close_detached are OK and change nothing of the parent's\n");
  return 0;
}

static int delta_check(const char *dir, const char *mode) {
  enum { PAGES = 8, PAGE = 4096 };
  CHECK(setenv("NVS_DIR", dir, 1) == 0 && setenv("NVS_DELTA", mode, 1) == 0);
  CHECK(setenv("NVS_POOL_SIZE", "16M", 1) == 0);
  OK(nvs_init(0));
  char *obj = nvs_alloc(PAGES * PAGE, "grid");
  CHECK(obj != NULL);
  memset(obj, 'A', PAGES * PAGE);
  nvs_snapshot(0);
  CHECK(*nvs_last_error() == 0);
  memset(obj, 'B', PAGE);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    nvs_snapshot(0); /* refused: a fork cannot write its parent's pool */
    CHECK(strstr(nvs_last_error(), "fork") != NULL);
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  memset(obj + 5 * PAGE, 'C', PAGE);
  nvs_snapshot(0);
  CHECK(*nvs_last_error() == 0);
  OK(nvs_finalize());

  char path[4096];
  snprintf(path, sizeof path, "%s/nvs.0.pool", dir);
  struct nvs_pool *p = NULL;
  OK(nvs_pool_open(path, NVS_OPEN_READ_ONLY, &p));
  static char got[PAGES * PAGE], want[PAGES * PAGE];
  size_t n = 0;
  OK(nvs_get(p, "grid", 2, got, sizeof got, &n));
  memset(want, 'A', sizeof want);
  memset(want, 'B', PAGE);
  memset(want + 5 * PAGE, 'C', PAGE);
  CHECK(n == sizeof want);
  for (int pg = 0; pg < PAGES; pg++) {
    if (memcmp(got + pg * PAGE, want + pg * PAGE, PAGE) != 0) {
      fprintf(stderr, "version 2, page %d: holds '%c', wanted '%c'\n", pg, got[pg * PAGE], want[pg * PAGE]);
      exit(1);
    }
  }
  OK(nvs_pool_close(p));
  printf("fork delta (%s): a child's refused snapshot leaves the parent's next one whole\n", mode);
  return 0;
}

static struct nvs_pool *busy_pool;
static volatile int stop_putting;

static void *putter(void *arg) {
  (void)arg;
  static char big[4 << 20];
  while (!stop_putting) {
    int rc = nvs_put(busy_pool, 1, "big", big, sizeof big, NULL);
    if (rc == NVS_E_FULL) rc = nvs_reclaim(busy_pool, 1, NULL);
    OK(rc);
  }
  return NULL;
}

static int thread_check(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/thread.pool", dir);
  OK(nvs_pool_create(path, 64 << 20, NULL, &busy_pool));
  OK(nvs_put(busy_pool, 0, "small", "kept", 4, NULL));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, putter, NULL) == 0);
  int refused = 0, read = 0;
  for (int i = 0; i < 10; i++) {
    usleep(2000);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
      alarm(10); /* a hang ends the child (SIGALRM) */
      char got[8];
      size_t n = 0;
      int rc = nvs_get(busy_pool, "small", 1, got, sizeof got, &n);
      CHECK(rc == NVS_OK || rc == NVS_E_BUSY);
      if (rc == NVS_OK) CHECK(n == 4 && memcmp(got, "kept", 4) == 0);
      if (rc == NVS_E_BUSY) CHECK(strstr(nvs_last_error(), "forked") != NULL);
      OK(nvs_pool_close(busy_pool));
      _exit(rc == NVS_OK ? 0 : 10);
    }
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 10);
    if (WEXITSTATUS(st) == 10) refused++; else read++;
  }
  stop_putting = 1;
  CHECK(pthread_join(t, NULL) == 0);
  OK(nvs_pool_close(busy_pool));
  printf("fork thread: 10 children beside a putting thread: %d read, %d refused (the lock held at the fork), none hung\n",
         read, refused);
  return 0;
}

static void *alloc_free(void *arg) {
  long *bad = arg;
  for (int i = 0; i < 500; i++) {
    unsigned long n = 64 + (unsigned long)(i % 50);
    unsigned char *q = alloc(&n, "w");
    if (q == NULL) {
      (*bad)++;
      continue;
    }
    memset(q, 0xab, n);
    nvs_free(q);
    if (*nvs_last_error()) (*bad)++;
  }
  return NULL;
}

static int threads_check(void) {
  unsigned long n = 64;
  void *before = alloc(&n, "before"); /* no rank: memory, no snapshot stores it */
  CHECK(before != NULL);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    pthread_t t[4];
    long bad[4] = {0};
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, alloc_free, &bad[i]) == 0);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
    for (int i = 0; i < 4; i++) {
      if (bad[i]) {
        fprintf(stderr, "thread %d: %ld refused calls\n", i, bad[i]);
        _exit(1);
      }
    }
    nvs_free(before);
    CHECK(*nvs_last_error() == 0);
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  nvs_free(before);
  CHECK(*nvs_last_error() == 0);
  printf("fork threads: a child's threads wait for each other, none refused\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[2], "delta") == 0) return delta_check(argv[1], argv[3]);
  CHECK(argc == 3);
  if (strcmp(argv[2], "refresh") == 0) return refresh_check(argv[1]);
  if (strcmp(argv[2], "close") == 0) return close_check(argv[1]);
  if (strcmp(argv[2], "thread") == 0) return thread_check(argv[1]);
  if (strcmp(argv[2], "threads") == 0) return threads_check();
  fprintf(stderr, "unknown check %s\n", argv[2]);
  return 2;
}
