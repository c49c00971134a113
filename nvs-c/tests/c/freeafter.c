/* miniAMR frees every object after nvs_finalize: a silent no-op (it printed "nvs_init was
 * not called", false, once per object). A free before any nvs_init still says so.
 * argv[1]: a scratch directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "nvstream.h"

int main(int argc, char **argv) {
  CHECK(argc == 2 && setenv("NVS_DIR", argv[1], 1) == 0 && setenv("NVS_POOL_SIZE", "8M", 1) == 0);
  int x = 0;
  nvs_free(&x);
  CHECK(strstr(nvs_last_error(), "nvs_init was not called") != NULL);
  CHECK(nvs_init(0) == 0);
  enum { N = 100 };
  void *objs[N];
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "block%d", i);
    objs[i] = nvs_alloc(64, name);
    CHECK(objs[i] != NULL);
  }
  nvs_snapshot(0);
  CHECK(*nvs_last_error() == 0);
  CHECK(nvs_finalize() == 0);
  /* stderr into a file for the frees: nothing may be printed. */
  FILE *t = tmpfile();
  CHECK(t != NULL);
  int saved = dup(2);
  CHECK(saved >= 0 && dup2(fileno(t), 2) == 2);
  for (int i = 0; i < N; i++) {
    nvs_free(objs[i]);
    CHECK(*nvs_last_error() == 0);
  }
  CHECK(dup2(saved, 2) == 2);
  close(saved);
  CHECK(ftell(t) == 0);
  fclose(t);
  printf("freeafter: %d frees after nvs_finalize, silent\n", N);
  return 0;
}
