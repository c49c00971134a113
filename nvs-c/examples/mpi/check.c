/* The analytics job: rank i opens rank i's pool read-only and checks every byte of
 * every version of every array the simulation wrote. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "nvs.h"
#include "values.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int steps = argc > 1 ? atoi(argv[1]) : STEPS;
  const char *dir = getenv("NVS_DIR") ? getenv("NVS_DIR") : "/dev/shm";
  char path[4096];
  snprintf(path, sizeof path, "%s/nvs.%d.pool", dir, rank);
  nvs_pool *p = NULL;
  if (nvs_pool_open(path, NVS_OPEN_READ_ONLY, &p) != NVS_OK) {
    fprintf(stderr, "check rank %d: %s\n", rank, nvs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  size_t checked = 0, bad = 0;
  for (int a = 0; a < ARRAYS; a++) {
    char name[32];
    snprintf(name, sizeof name, "field%d", a);
    uint64_t latest = 0;
    if (nvs_latest(p, name, &latest) != NVS_OK || latest != (uint64_t)steps) {
      fprintf(stderr, "check rank %d: %s has %llu versions, wanted %d (%s)\n", rank, name,
              (unsigned long long)latest, steps, nvs_last_error());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double *got = malloc(array_len(a) * sizeof(double));
    for (int v = 1; v <= steps; v++) {
      size_t len = 0;
      if (nvs_get(p, name, (uint64_t)v, got, array_len(a) * sizeof(double), &len) != NVS_OK ||
          len != array_len(a) * sizeof(double)) {
        fprintf(stderr, "check rank %d: %s v%d: %s\n", rank, name, v, nvs_last_error());
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
      for (size_t i = 0; i < array_len(a); i++, checked++)
        if (got[i] != value(rank, a, v, i)) bad++;
    }
    free(got);
  }
  nvs_pool_close(p);
  printf("check rank %d: %d arrays x %d versions, %zu values checked, %zu wrong\n", rank, ARRAYS, steps, checked,
         bad);
  MPI_Finalize();
  return bad != 0;
}
