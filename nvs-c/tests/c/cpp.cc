// nvstream.h from C++ (built with -Wall -Wextra -pedantic-errors -Werror): a string
// literal is a name (nvs_alloc takes const char *), and nvs_last_error() is declared
// without nvs.h. Run: cpp SCRATCH_DIR
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "nvstream.h"

#define CHECK(cond)                                                                        \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, \
                   #cond, nvs_last_error());                                               \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

int main(int argc, char **argv) {
  CHECK(argc == 2);
  setenv("NVS_DIR", argv[1], 1);
  setenv("NVS_POOL_SIZE", "8M", 1);
  CHECK(nvs_init(0) == 0);
  double *t = static_cast<double *>(nvs_alloc(800, "temperature"));
  CHECK(t != nullptr);
  t[0] = 1;
  nvs_snapshot(0);
  CHECK(std::strcmp(nvs_last_error(), "") == 0);
  CHECK(nvs_finalize() == 0);
  std::printf("cpp: ok\n");
  return 0;
}
