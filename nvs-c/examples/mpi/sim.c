/* An MPI simulation instrumented for NVStream: every rank allocates its arrays with
 * nvs_alloc (one pool per rank, $NVS_DIR/nvs.<rank>.pool) and snapshots them each step.
 *   mpirun -np 2 ./sim [steps]        then        mpirun -np 2 ./check [steps] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "nvstream.h"
#include "values.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int steps = argc > 1 ? atoi(argv[1]) : STEPS;
  if (nvs_init(rank) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  double *field[ARRAYS];
  for (int a = 0; a < ARRAYS; a++) {
    char name[32];
    snprintf(name, sizeof name, "field%d", a);
    field[a] = nvs_alloc(array_len(a) * sizeof(double), name);
    if (!field[a]) MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double t0 = MPI_Wtime();
  for (int step = 1; step <= steps; step++) {
    for (int a = 0; a < ARRAYS; a++)
      for (size_t i = 0; i < array_len(a); i++) field[a][i] = value(rank, a, step, i);
    MPI_Barrier(MPI_COMM_WORLD);
    nvs_snapshot(rank);
  }
  double dt = MPI_Wtime() - t0;
  size_t bytes = 0;
  for (int a = 0; a < ARRAYS; a++) bytes += array_len(a) * sizeof(double);
  printf("sim rank %d/%d: %d snapshots of %d arrays (%zu bytes each step) in %.3f s\n", rank, size, steps, ARRAYS,
         bytes, dt);
  int rc = nvs_finalize();
  MPI_Finalize();
  return rc;
}
