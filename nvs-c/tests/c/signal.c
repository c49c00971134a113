/* A signal handler that calls nvs while its thread is inside an nvs call (the
 * "checkpoint on SIGTERM" pattern): the handler's call returns NVS_E_BUSY at once, with the
 * re-entry named in nvs_last_error, where it used to wait for ever for a lock its own
 * thread held. The main thread puts, gets (nvs.h) and snapshots (nvstream.h) 16 MiB
 * objects while a helper thread signals it, until the handler has been refused inside
 * each kind of call — also when the handler calls nvs on another pool (whose nvs_names
 * callback would put to the interrupted one): any call allocates, and the interrupted call
 * may hold the allocator's lock. Each signal is sent 100 us after the last handler
 * returned: a handler's call that found the thread outside nvs can take longer than a
 * fixed period (a whole snapshot), and signals sent meanwhile would run handlers back to
 * back, the main thread never running again. Calls of the handler that find the thread
 * outside nvs succeed (checked by raising the signal outside nvs at the end). An alarm
 * ends the process if anything hangs. argv[1]: a scratch directory. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nvstream.h"

enum { BIG = 16 << 20 };

static struct nvs_pool *pool, *other_pool;
/* 0: put, 1: get, 2: snapshot, 3: the handler does nothing, 4: the handler lists another
 * pool's names, whose callback puts to `pool` */
static volatile sig_atomic_t mode;
static volatile sig_atomic_t refused, refused_all, done_ok, other, named;
static pthread_t main_thread;
static volatile int stop;
static atomic_int handled; /* handler calls returned */

static volatile int cb_rc;
static char small[64], got[64];

static int put_from_callback(const char *name, size_t len, uint64_t latest, uint32_t versions, void *ctx) {
  (void)name, (void)len, (void)latest, (void)versions, (void)ctx;
  cb_rc = nvs_put(pool, 0, "small", small, sizeof small, NULL);
  return 1;
}

static void handler(int sig) {
  (void)sig;
  int rc;
  if (mode == 3) {
    atomic_fetch_add(&handled, 1);
    return;
  }
  if (mode == 4) {
    cb_rc = NVS_E_OTHER;
    rc = nvs_names(other_pool, put_from_callback, NULL);
    if (rc == NVS_OK) rc = cb_rc;
  } else if (mode == 2) {
    nvs_snapshot(0);
    const char *e = nvs_last_error();
    rc = *e == 0 ? NVS_OK : strstr(e, "inside an nvs call") ? NVS_E_BUSY : NVS_E_OTHER;
  } else if (mode == 1) {
    size_t n = 0;
    rc = nvs_get(pool, "small", NVS_LATEST, got, sizeof got, &n);
  } else {
    rc = nvs_put(pool, 0, "small", small, sizeof small, NULL);
  }
  if (rc == NVS_E_BUSY) {
    refused++;
    refused_all++;
    if (strstr(nvs_last_error(), "signal handler") != NULL) named++;
  } else if (rc == NVS_OK) {
    done_ok++;
  } else {
    other++;
  }
  atomic_fetch_add(&handled, 1);
}

static void *signaller(void *arg) {
  (void)arg;
  while (!stop) {
    usleep(100);
    int before = atomic_load(&handled);
    pthread_kill(main_thread, SIGUSR1);
    while (!stop && atomic_load(&handled) == before) usleep(10);
  }
  return NULL;
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  setvbuf(stdout, NULL, _IOLBF, 0); /* what got done shows if the alarm ends it */
  alarm(60); /* a hang ends the process (SIGALRM) */
  char path[4096];
  snprintf(path, sizeof path, "%s/signal.pool", argv[1]);
  OK(nvs_pool_create(path, 256 << 20, NULL, &pool));
  static char big[BIG];
  memset(big, 7, sizeof big);
  OK(nvs_put(pool, 0, "small", small, sizeof small, NULL));
  OK(nvs_put(pool, 0, "big", big, sizeof big, NULL));
  CHECK(setenv("NVS_DIR", argv[1], 1) == 0 && setenv("NVS_POOL_SIZE", "512M", 1) == 0);
  CHECK(setenv("NVS_KEEP", "1", 1) == 0);
  char other_path[4096];
  snprintf(other_path, sizeof other_path, "%s/other.pool", argv[1]);
  OK(nvs_pool_create(other_path, 8 << 20, NULL, &other_pool));
  OK(nvs_put(other_pool, 0, "listed", "x", 1, NULL));
  OK(nvs_init(0));
  char *obj = nvs_alloc(BIG, "grid");
  CHECK(obj != NULL);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  main_thread = pthread_self();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, signaller, NULL) == 0);
  const char *what[4] = {"nvs_put", "nvs_get", "nvs_snapshot", "nvs_put (the handler lists another pool)"};
  for (int m = 0; m < 4; m++) {
    refused = 0;
    mode = m == 3 ? 4 : m;
    int calls = 0;
    while (refused == 0 && calls < 2000) {
      calls++;
      int rc = NVS_OK;
      if (m == 0 || m == 3) {
        rc = nvs_put(pool, 1, "big", big, sizeof big, NULL);
      } else if (m == 1) {
        size_t n = 0;
        rc = nvs_get(pool, "big", NVS_LATEST, big, sizeof big, &n);
      } else {
        nvs_snapshot(0);
        rc = *nvs_last_error() == 0 ? NVS_OK : NVS_E_OTHER;
      }
      if (rc == NVS_E_FULL) { /* the pool is a ring for this test */
        mode = 3;
        OK(nvs_reclaim(pool, 1, NULL));
        mode = m == 3 ? 4 : m;
      } else {
        OK(rc);
      }
    }
    mode = 3; /* nothing in the handler while this thread prints (printf may hold malloc's lock) */
    printf("%s: the handler was refused %d times inside it (%d calls); %d handler calls succeeded\n", what[m],
           (int)refused, calls, (int)done_ok);
    CHECK(refused > 0);
  }
  stop = 1;
  CHECK(pthread_join(t, NULL) == 0);
  /* Outside nvs, each kind of handler call succeeds (a callback's put to the pool too). */
  for (int m = 0; m < 4; m++) {
    int before = done_ok;
    mode = m == 3 ? 4 : m;
    CHECK(raise(SIGUSR1) == 0);
    mode = 3;
    CHECK(done_ok == before + 1);
  }
  mode = 3;
  CHECK(other == 0);
  CHECK(named == refused_all);
  OK(nvs_finalize());
  OK(nvs_pool_close(other_pool));
  OK(nvs_pool_close(pool));
  printf("signal: every refused call named the re-entry; none hung\n");
  return 0;
}
