/* The wrapper prints each failure on stderr; a stderr that cannot take it (here
 * /dev/full: every write fails with ENOSPC) must not abort the rank: the call still
 * returns its status. Run: fullerr SCRATCH_DIR */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "nvstream.h"

int main(int argc, char **argv) {
  CHECK(argc == 2);
  /* A pool path under a file, not a directory: nvs_init fails and says why. */
  char bad[4096];
  snprintf(bad, sizeof bad, "%s/not-a-dir", argv[1]);
  FILE *f = fopen(bad, "w");
  CHECK(f != NULL);
  fclose(f);
  setenv("NVS_DIR", bad, 1);
  int saved = dup(2);
  int full = open("/dev/full", O_WRONLY);
  CHECK(saved >= 0 && full >= 0 && dup2(full, 2) == 2);
  int st = nvs_init(7);
  dup2(saved, 2);
  CHECK(st != 0);
  CHECK(strlen(nvs_last_error()) > 0);
  printf("fullerr: ok (%s)\n", nvs_last_error());
  return 0;
}
