// nvs_put_batch of two builds of libnvs side by side in one process: the fixed cost of a
// batch of small objects (ns per object) and the mallocs each call makes.
//
// Both libraries are dlopen'ed (RTLD_LOCAL: each its own symbols) and write the same pool
// file in turn (two files of a tmpfs can differ in speed on a VM): every rep opens it with
// one library, writes the whole pool once untimed (page faults of the fresh mapping), times
// BATCHES batches one by one, closes it, then the same with the other library; which goes
// first alternates. A rep's figure is its median batch; printed are the medians over the
// reps of each library and of the per-rep ratio. Mallocs (malloc, calloc, realloc,
// posix_memalign, aligned_alloc, memalign: this program interposes them) are counted on
// this thread inside nvs_put_batch only. Checksums are on (the pool's default).
//
//   cc -O2 -rdynamic -I nvs-c/include nvs-c/examples/put_batch_bench.c -ldl -o /tmp/pbb
//   /tmp/pbb OLD/libnvs.so NEW/libnvs.so /dev/shm [reps]
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvs.h"

// ---- malloc counting (glibc's own entry points underneath)
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static __thread int counting;
static __thread unsigned long counted;
void *malloc(size_t n) {
  counted += counting;
  return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
  counted += counting;
  return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
  counted += counting;
  return __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) {
  counted += counting;
  return __libc_memalign(a, n);
}
void *aligned_alloc(size_t a, size_t n) {
  counted += counting;
  return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
  counted += counting;
  void *p = __libc_memalign(a, n);
  if (!p) return 12;
  *out = p;
  return 0;
}

// ---- the two libraries
typedef struct {
  const char *path;
  int32_t (*create)(const char *, uint64_t, const struct nvs_create_options *, struct nvs_pool **);
  int32_t (*open)(const char *, int32_t, struct nvs_pool **);
  int32_t (*close)(struct nvs_pool *);
  int32_t (*put_batch)(struct nvs_pool *, uint32_t, const struct nvs_object *, size_t, uint64_t *);
  int32_t (*reclaim)(struct nvs_pool *, uint32_t, uint32_t *);
  const char *(*last_error)(void);
} lib_t;

static void *sym(void *h, const char *name) {
  void *s = dlsym(h, name);
  if (!s) {
    fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
    exit(1);
  }
  return s;
}

static lib_t load(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(1);
  }
  lib_t l;
  memset(&l, 0, sizeof l);
  l.path = path;
  *(void **)&l.create = sym(h, "nvs_pool_create");
  *(void **)&l.open = sym(h, "nvs_pool_open");
  *(void **)&l.close = sym(h, "nvs_pool_close");
  *(void **)&l.put_batch = sym(h, "nvs_put_batch");
  *(void **)&l.reclaim = sym(h, "nvs_reclaim");
  *(void **)&l.last_error = sym(h, "nvs_last_error");
  return l;
}

static void check(const lib_t *l, int32_t rc, const char *what) {
  if (rc != NVS_OK) {
    fprintf(stderr, "%s (%s): %d %s\n", what, l->path, rc, l->last_error());
    exit(1);
  }
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define POOL (512ull << 20)
#define BATCHES 200

typedef struct {
  size_t n, size;
} shape_t;

// One rep of `l` on the pool at `path`: the median ns per object of BATCHES timed batches;
// `*mallocs` the mallocs per call (of the timed calls).
static double rep(const lib_t *l, const char *path, shape_t s, struct nvs_object *objs, double *mallocs) {
  struct nvs_pool *p;
  check(l, l->open(path, NVS_OPEN_READ_WRITE, &p), "open");
  size_t batch_bytes = s.n * s.size;
  size_t per_reclaim = (64u << 20) / batch_bytes + 1;
  // The whole pool once, untimed: every page of this mapping faulted in.
  for (size_t i = 0; i < POOL / batch_bytes; i++) {
    check(l, l->put_batch(p, 0, objs, s.n, NULL), "warm put_batch");
    if (i % per_reclaim == per_reclaim - 1) check(l, l->reclaim(p, 1, NULL), "reclaim");
  }
  check(l, l->reclaim(p, 1, NULL), "reclaim");
  double t[BATCHES];
  unsigned long m = 0;
  for (int i = 0; i < BATCHES; i++) {
    if ((size_t)i % per_reclaim == per_reclaim - 1) check(l, l->reclaim(p, 1, NULL), "reclaim");
    counted = 0;
    counting = 1;
    uint64_t a = now_ns();
    int32_t rc = l->put_batch(p, 0, objs, s.n, NULL);
    uint64_t b = now_ns();
    counting = 0;
    check(l, rc, "put_batch");
    m += counted;
    t[i] = (double)(b - a) / (double)s.n;
  }
  *mallocs = (double)m / BATCHES;
  check(l, l->close(p), "close");
  return median(t, BATCHES);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s OLD/libnvs.so NEW/libnvs.so DIR [reps]\n", argv[0]);
    return 2;
  }
  lib_t libs[2] = {load(argv[1]), load(argv[2])};
  int reps = argc > 4 ? atoi(argv[4]) : 15;
  if (reps < 1 || reps > 1000) reps = 15;
  shape_t shapes[] = {{64, 1024}, {1000, 4096}};
  for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
    shape_t s = shapes[k];
    char path[4096];
    snprintf(path, sizeof path, "%s/put_batch_bench.%d.%zu.pool", argv[3], (int)getpid(), k);
    struct nvs_pool *p;
    check(&libs[0], libs[0].create(path, POOL, NULL, &p), "create");
    check(&libs[0], libs[0].close(p), "close");
    char *data = aligned_alloc(64, s.n * s.size);
    memset(data, 0x5a, s.n * s.size);
    char(*names)[24] = calloc(s.n, 24);
    struct nvs_object *objs = calloc(s.n, sizeof *objs);
    for (size_t i = 0; i < s.n; i++) {
      snprintf(names[i], 24, "obj%zu", i);
      objs[i].name = names[i];
      objs[i].data = data + i * s.size;
      objs[i].len = s.size;
    }
    double ns[2][1000], ratio[1000], mallocs[2] = {0, 0};
    for (int r = 0; r < reps; r++) {
      for (int j = 0; j < 2; j++) {
        int which = (r % 2) ? 1 - j : j;
        ns[which][r] = rep(&libs[which], path, s, objs, &mallocs[which]);
      }
      ratio[r] = ns[1][r] / ns[0][r];
    }
    double m_old = median(ns[0], reps), m_new = median(ns[1], reps), m_ratio = median(ratio, reps);
    printf("%4zu x %5zu B: old %7.1f ns/object, new %7.1f ns/object, new/old %.3f (median of %d reps of %d "
           "batches); mallocs per call: old %.1f, new %.1f\n",
           s.n, s.size, m_old, m_new, m_ratio, reps, BATCHES, mallocs[0], mallocs[1]);
    fflush(stdout);
    unlink(path);
    free(objs);
    free(names);
    free(data);
  }
  return 0;
}
