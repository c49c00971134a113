/* NVS_DELTA where the kernel has no userfaultfd write-protect (this program's syscall()
 * refuses SYS_userfaultfd with ENOSYS, as such a kernel does; libnvs.a is linked in, so
 * its calls come here): NVS_DELTA=1 stores full snapshots, says so once, and a system
 * call writing into nvs_alloc'ed memory (fread) works. NVS_DELTA=mprotect, asked for
 * explicitly, tracks with mprotect, with its limits: 64 objects, and a read into tracked
 * memory fails. Run: noufd SCRATCH_DIR */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "check.h"
#include "nvstream.h"

static long (*real_syscall)(long, ...);

long syscall(long nr, ...) {
  va_list ap;
  va_start(ap, nr);
  long a[6];
  for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  if (nr == SYS_userfaultfd) {
    errno = ENOSYS;
    return -1;
  }
  if (!real_syscall) real_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

enum { N = 1 << 20, PAGE = 4096 };
static unsigned char want[N], got[N];

static void read_file(const char *path, unsigned char *into, int expect_ok) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  size_t n = fread(into, 1, N, f);
  if (expect_ok) CHECK(n == N && !ferror(f));
  else CHECK(n < N && ferror(f));
  fclose(f);
}

/* Version v of "a" in rank `rank`'s pool is `expect`, stored in `stored` bytes (0: fewer
 * than N). */
static void check_version(const char *dir, int rank, uint64_t v, const unsigned char *expect, size_t stored) {
  char path[4096];
  snprintf(path, sizeof path, "%s/nvs.%d.pool", dir, rank);
  nvs_pool *p = NULL;
  OK(nvs_pool_open(path, NVS_OPEN_READ_ONLY, &p));
  size_t len;
  OK(nvs_get(p, "a", v, got, sizeof got, &len));
  CHECK(len == N && memcmp(got, expect, N) == 0);
  nvs_object_info info;
  OK(nvs_stat(p, "a", v, &info));
  if (stored) CHECK(info.stored_bytes == stored);
  else CHECK(info.stored_bytes < N);
  OK(nvs_pool_close(p));
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  const char *dir = argv[1];
  setenv("NVS_DIR", dir, 1);
  setenv("NVS_POOL_SIZE", "64M", 1);
  char input[4096];
  snprintf(input, sizeof input, "%s/input.bin", dir);
  for (size_t i = 0; i < N; i++) want[i] = (unsigned char)(i * 7 + i / PAGE);
  FILE *f = fopen(input, "wb");
  CHECK(f && fwrite(want, 1, N, f) == N && fclose(f) == 0);

  /* NVS_DELTA=1 without uffd-wp: full snapshots; fread into the array works. Twice (a
   * restarted rank): the message is printed once. */
  static unsigned char ones[N];
  memset(ones, 1, N);
  setenv("NVS_DELTA", "1", 1);
  for (int round = 0; round < 2; round++) {
    CHECK(nvs_init(0) == 0);
    unsigned char *a = nvs_alloc(N, "a");
    CHECK(a != NULL);
    memset(a, 1, N);
    nvs_snapshot(0);
    read_file(input, a, 1);
    nvs_snapshot(0);
    CHECK(*nvs_last_error() == 0);
    CHECK(nvs_finalize() == 0);
  }
  for (uint64_t v = 1; v <= 4; v++) check_version(dir, 0, v, v % 2 ? ones : want, N);

  /* More objects than mprotect could track: no limit in full mode. */
  CHECK(nvs_init(2) == 0);
  for (int i = 0; i < 100; i++) {
    char name[16];
    snprintf(name, sizeof name, "o%d", i);
    CHECK(nvs_alloc(16, name) != NULL);
  }
  CHECK(nvs_finalize() == 0);

  /* NVS_DELTA=mprotect: deltas, hundreds of objects (CM1 registers 94; it used to stop
   * at 64), and a read into tracked memory fails (EFAULT) once tracking is armed (after
   * the first snapshot). */
  setenv("NVS_DELTA", "MProtect", 1);
  CHECK(nvs_init(1) == 0);
  unsigned char *a = nvs_alloc(N, "a");
  CHECK(a != NULL);
  enum { MORE = 300 };
  static void *more[MORE];
  for (int i = 0; i < MORE; i++) {
    char name[16];
    snprintf(name, sizeof name, "o%d", i);
    more[i] = nvs_alloc(16, name);
    CHECK(more[i] != NULL);
  }
  for (int i = 0; i < MORE; i++) nvs_free(more[i]);
  memcpy(a, want, N);
  nvs_snapshot(1);
  a[5 * PAGE] ^= 0xff;
  want[5 * PAGE] ^= 0xff;
  nvs_snapshot(1);
  read_file(input, a, 0);
  CHECK(nvs_finalize() == 0);
  check_version(dir, 1, 2, want, 0); /* one page stored, not the megabyte */
  printf("noufd: ok\n");
  return 0;
}
