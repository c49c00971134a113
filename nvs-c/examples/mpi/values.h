/* What the MPI example's ranks compute: shared by the simulation and the check. */
#include <stddef.h>
#include <stdint.h>
enum { ARRAYS = 4, STEPS = 10 };
/* Array a holds 4096 << a doubles (32 KiB to 256 KiB). */
static inline size_t array_len(int a) { return (size_t)4096 << a; }
static inline double value(int rank, int a, int step, size_t i) {
  return rank * 1e9 + a * 1e7 + step * 1e5 + (double)i;
}
