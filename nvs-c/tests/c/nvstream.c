/* The NVStream wrapper API: a rank allocates named objects, snapshots them, restarts,
 * and every version reads back byte-exact. Run: nvstream SCRATCH_DIR [delta] */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "nvstream.h"

enum { BLOCKS = 2000, BIG = 1 << 20 };
static const int RANK = 3;

static double *temp;          /* 1000 doubles */
static int *cells;            /* 5000 ints */
static unsigned char *big;    /* BIG bytes: one page changes per step */
static unsigned char *block[BLOCKS];
static char names[BLOCKS][24];

static void compute(int step) {
  for (int i = 0; i < 1000; i++) temp[i] = step * 1000.0 + i;
  for (int i = 0; i < 5000; i++) cells[i] = step * 7 + i;
  big[(size_t)step * 4096 % BIG] = (unsigned char)step;
  for (int b = 0; b < BLOCKS; b++) block[b][step % 256] = (unsigned char)(b + step);
}

static void allocate(void) {
  temp = nvs_alloc(1000 * sizeof(double), "temperature");
  cells = nvs_alloc(5000 * sizeof(int), "cells");
  big = nvs_alloc(BIG, "big");
  CHECK(temp && cells && big);
  for (int b = 0; b < BLOCKS; b++) {
    snprintf(names[b], sizeof names[b], "block%d", b);
    block[b] = nvs_alloc(256, names[b]);
    CHECK(block[b] != NULL);
  }
}

/* nvs_finalize(), with what it prints on stderr caught (a static buffer). */
static const char *finalize_quoted(int *status) {
  static char out[4096];
  FILE *t = tmpfile();
  CHECK(t != NULL);
  fflush(stderr);
  int saved = dup(2);
  CHECK(saved >= 0 && dup2(fileno(t), 2) == 2);
  *status = nvs_finalize();
  fflush(stderr);
  CHECK(dup2(saved, 2) == 2);
  close(saved);
  rewind(t);
  size_t n = fread(out, 1, sizeof out - 1, t);
  out[n] = 0;
  fclose(t);
  fprintf(stderr, "%s", out);
  return out;
}

/* Version v of every object, as the rank computed it at step v (steps since start). */
/* `restart`: the version a restarted rank stored in full (its tracking starts again). */
static void check_pool(const char *path, int steps, int delta, int restart) {
  nvs_pool *p = NULL;
  OK(nvs_pool_open(path, NVS_OPEN_READ_ONLY, &p));
  static unsigned char want_big[BIG], got_big[BIG];
  memset(want_big, 0, sizeof want_big);
  size_t len;
  for (int v = 1; v <= steps; v++) {
    double t[1000];
    OK(nvs_get(p, "temperature", (uint64_t)v, t, sizeof t, &len));
    CHECK(len == sizeof t);
    for (int i = 0; i < 1000; i++) CHECK(t[i] == v * 1000.0 + i);
    int c[5000];
    OK(nvs_get(p, "cells", (uint64_t)v, c, sizeof c, &len));
    for (int i = 0; i < 5000; i++) CHECK(c[i] == v * 7 + i);
    want_big[(size_t)v * 4096 % BIG] = (unsigned char)v;
    OK(nvs_get(p, "big", (uint64_t)v, got_big, sizeof got_big, &len));
    CHECK(len == BIG && memcmp(got_big, want_big, BIG) == 0);
    nvs_object_info info;
    OK(nvs_stat(p, "big", (uint64_t)v, &info));
    /* With dirty tracking a step stores the pages it wrote, not the whole megabyte. */
    if (delta && v > 1 && v != restart) CHECK(info.stored_bytes < BIG / 4);
    else CHECK(info.stored_bytes == BIG);
    unsigned char blk[256] = {0}, got[256];
    for (int b = 0; b < BLOCKS; b += 97) {
      memset(blk, 0, sizeof blk);
      for (int s = 1; s <= v; s++) blk[s % 256] = (unsigned char)(b + s);
      char name[24];
      snprintf(name, sizeof name, "block%d", b);
      OK(nvs_get(p, name, (uint64_t)v, got, sizeof got, &len));
      CHECK(len == 256 && memcmp(got, blk, 256) == 0);
    }
  }
  uint64_t latest;
  OK(nvs_latest(p, "temperature", &latest));
  CHECK(latest == (uint64_t)steps);
  OK(nvs_pool_close(p));
}

static void *free_null(void *arg) {
  nvs_free(NULL); /* succeeds */
  CHECK(*nvs_last_error() == 0);
  return arg;
}

int main(int argc, char **argv) {
  CHECK(argc >= 2);
  int delta = argc > 2 && strcmp(argv[2], "delta") == 0;
  setenv("NVS_DIR", argv[1], 1);
  setenv("NVS_POOL_SIZE", " 256M ", 1); /* blanks around a value are ignored */
  /* "off" is no (it used to turn delta on: the full run's stored sizes would show it). */
  setenv("NVS_DELTA", delta ? "Yes" : "off", 1);
  char path[4096];
  snprintf(path, sizeof path, "%s/nvs.%d.pool", argv[1], RANK);

  /* Before nvs_init: refused, never a crash. The same failure again and again is
   * printed the 1st, 2nd and 4th time of 5 (tests/c.rs counts), each call failing. */
  CHECK(nvs_alloc(10, "early") == NULL);
  for (int i = 0; i < 5; i++) {
    nvs_snapshot(RANK);
    CHECK(strstr(nvs_last_error(), "nvs_init was not called") != NULL);
    /* Another thread's call that succeeds in between neither resets nor hides it. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_null, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }

  /* A bad NVS_KEEP fails nvs_init and leaves no pool behind; a snapshot with nothing
   * registered does nothing (no error). */
  {
    char other[4096];
    snprintf(other, sizeof other, "%s/nvs.%d.pool", argv[1], RANK + 10);
    setenv("NVS_KEEP", "x", 1);
    CHECK(nvs_init(RANK + 10) == NVS_E_ARG);
    CHECK(access(other, F_OK) != 0);
    /* Later calls say that nvs_init failed, and why (not "nvs_init was not called"). */
    CHECK(nvs_alloc(8, "after") == NULL);
    CHECK(strstr(nvs_last_error(), "nvs_init failed") && strstr(nvs_last_error(), "NVS_KEEP=x"));
    /* Fortran's alloc still returns zeroed memory the app can use (a Fortran app uses
     * it at once: NULL was a SIGSEGV), no snapshot stores it, and nvs_free frees it. */
    {
      unsigned long n = 3000;
      unsigned char *orphan = alloc(&n, "orphan    ");
      CHECK(orphan != NULL);
      CHECK(strstr(nvs_last_error(), "nvs_init failed") && strstr(nvs_last_error(), "snapshots do not store it"));
      for (unsigned long i = 0; i < n; i++) CHECK(orphan[i] == 0);
      memset(orphan, 0x5a, n);
      nvs_free_(orphan);
      CHECK(nvs_last_error()[0] == '\0');
      nvs_free(orphan); /* freed already: refused, never a double free */
      CHECK(strstr(nvs_last_error(), "nvs_init failed") != NULL);
    }
    unsetenv("NVS_KEEP");
    /* 0 would release every version; yes/no variables take 1/0, true/false, on/off,
     * yes/no and nothing else. Each refusal names the variable. */
    const char *bad[][2] = {{"NVS_KEEP", "0"}, {"NVS_DELTA", "2"}, {"NVS_STATS", "maybe"}};
    for (int i = 0; i < 3; i++) {
      const char *was = getenv(bad[i][0]);
      char keep[64];
      snprintf(keep, sizeof keep, "%s", was ? was : "");
      setenv(bad[i][0], bad[i][1], 1);
      CHECK(nvs_init(RANK + 10) == NVS_E_ARG);
      CHECK(strstr(nvs_last_error(), bad[i][0]) != NULL);
      CHECK(access(other, F_OK) != 0);
      if (was) setenv(bad[i][0], keep, 1);
      else unsetenv(bad[i][0]);
    }
    setenv("NVS_KEEP", " 2", 1); /* blanks ignored, as NVS_POOL_SIZE's */
    setenv("NVS_STATS", "FALSE", 1); /* no stats (it used to print them) */
    CHECK(nvs_init(RANK + 10) == 0);
    int status;
    CHECK(strstr(finalize_quoted(&status), "snapshots") == NULL);
    CHECK(status == 0);
    unsetenv("NVS_STATS");
    CHECK(remove(other) == 0);
    unsetenv("NVS_KEEP");
    CHECK(nvs_init(RANK + 10) == 0);
    /* Every wrapper call clears the last error: after a snapshot it is empty exactly
     * when the snapshot succeeded. */
    nvs_free(&other); /* fails: the last error is nvs_free's */
    CHECK(strncmp(nvs_last_error(), "nvs_free", 8) == 0);
    nvs_snapshot(RANK + 10);
    CHECK(strcmp(nvs_last_error(), "") == 0);
    void *gone = nvs_alloc(8, "gone");
    CHECK(gone != NULL);
    nvs_free(gone);
    nvs_snapshot(RANK + 10);
    CHECK(strcmp(nvs_last_error(), "") == 0);
    nvs_snapshot(RANK + 11); /* another rank's id: fails */
    CHECK(strncmp(nvs_last_error(), "nvs_snapshot", 12) == 0);
    CHECK(nvs_finalize() == 0);
  }

  /* NVS_KEEP set, the pool still full after reclaim: the error says reclaim ran. */
  {
    setenv("NVS_POOL_SIZE", "16M", 1);
    setenv("NVS_KEEP", "1", 1);
    CHECK(nvs_init(RANK + 20) == 0);
    unsigned char *huge = nvs_alloc(10 << 20, "huge");
    CHECK(huge != NULL);
    nvs_snapshot(RANK + 20);
    CHECK(*nvs_last_error() == 0);
    memset(huge, 1, 10 << 20); /* every page: a delta as large as the object */
    nvs_snapshot(RANK + 20); /* no room for a second version, nothing to release */
    CHECK(strstr(nvs_last_error(), "reclaim ran and freed 0 segments") != NULL);
    CHECK(nvs_finalize() == 0);
    setenv("NVS_POOL_SIZE", " 256M ", 1);
    unsetenv("NVS_KEEP");
  }

  setenv("NVS_STATS", "1", 1);
  CHECK(nvs_init(RANK) == 0);
  unsetenv("NVS_STATS");
  CHECK(nvs_init(RANK) != 0); /* once per process */
  allocate();
  CHECK(nvs_alloc(8, "cells") == NULL); /* a name registered already */
  CHECK(nvs_alloc(8, "") == NULL);
  CHECK(nvs_alloc(8, NULL) == NULL);
  void *scratch = nvs_alloc(32, "scratch");
  CHECK(scratch != NULL);
  nvs_free(scratch); /* unregistered: no snapshot stores it */
  CHECK(nvs_alloc(0, "empty") != NULL); /* an object of no bytes, in either mode */
  int local;
  nvs_free(&local);  /* not from nvs_alloc: an error, printed */
  nvs_free(NULL);
  for (int step = 1; step <= 3; step++) {
    compute(step);
    nvs_snapshot(RANK);
  }
  nvs_snapshot(RANK + 1); /* another rank's id: refused, printed */
  {
    /* NVS_STATS: the objects' bytes, and the bytes stored (fewer with deltas). */
    int status;
    const char *said = finalize_quoted(&status);
    CHECK(status == 0);
    unsigned long long snaps, objs, bytes, stored;
    const char *at = strstr(said, " snapshots, ");
    CHECK(at != NULL);
    while (at > said && at[-1] != ' ') at--;
    CHECK(sscanf(at, "%llu snapshots, %llu objects, %llu bytes of objects, %llu bytes stored", &snaps, &objs,
                 &bytes, &stored) == 4);
    unsigned long long per_step = 1000 * sizeof(double) + 5000 * sizeof(int) + BIG + BLOCKS * 256;
    CHECK(snaps == 3 && objs == 3 * (3 + BLOCKS + 1) && bytes == 3 * per_step);
    if (delta) CHECK(stored < bytes - BIG); /* "big": one page a step after the first */
    else CHECK(stored == bytes);
  }
  CHECK(nvs_finalize() != 0);
  check_pool(path, 3, delta, 0);
  {
    nvs_pool *p = NULL;
    size_t len;
    OK(nvs_pool_open(path, NVS_OPEN_READ_ONLY, &p));
    IS(NVS_E_NOT_FOUND, nvs_get(p, "scratch", 1, NULL, 0, &len));
    for (uint64_t v = 1; v <= 3; v++) {
      len = 99;
      OK(nvs_get(p, "empty", v, NULL, 0, &len));
      CHECK(len == 0);
    }
    OK(nvs_pool_close(p));
  }

  /* A restarted rank appends: its steps continue from the last committed one. The
   * objects come back zeroed; the application restores them (here: recomputes). */
  CHECK(nvs_init(RANK) == 0);
  allocate();
  {
    /* The same content as before the restart, so "big" carries over exactly. */
    for (int s = 1; s <= 3; s++) big[(size_t)s * 4096 % BIG] = (unsigned char)s;
    for (int b = 0; b < BLOCKS; b++)
      for (int s = 1; s <= 3; s++) block[b][s % 256] = (unsigned char)(b + s);
  }
  for (int step = 4; step <= 5; step++) {
    compute(step);
    nvs_snapshot(RANK);
  }
  CHECK(nvs_finalize() == 0);
  check_pool(path, 5, delta, 4);

  /* Fortran's entry points are the same calls. */
  int id = RANK;
  CHECK(nvs_init_(&id) == 0);
  unsigned long n = 8;
  double *x = alloc(&n, "fortran");
  CHECK(x != NULL);
  x[0] = 42.0;
  double *y = alloc_(&n, "legacy"); /* implicit interfaces call alloc_ */
  CHECK(y != NULL);
  y[0] = 43.0;
  nvs_snapshot_(&id);
  nvs_free_(x);
  nvs_free_(y);
  CHECK(nvs_finalize_() == 0);
  {
    nvs_pool *p = NULL;
    double got;
    size_t len;
    OK(nvs_pool_open(path, NVS_OPEN_READ_ONLY, &p));
    OK(nvs_get(p, "fortran", 1, &got, sizeof got, &len));
    CHECK(len == 8 && got == 42.0);
    OK(nvs_get(p, "legacy", 1, &got, sizeof got, &len));
    CHECK(len == 8 && got == 43.0);
    OK(nvs_pool_close(p));
  }
  printf("nvstream%s: ok\n", delta ? " (delta)" : "");
  return 0;
}
