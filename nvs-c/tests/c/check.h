/* A tiny assertion kit for the C tests: CHECK(cond), OK(call), IS(status, call). */
#ifndef NVS_TEST_CHECK_H
#define NVS_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include "nvs.h"

#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, \
              #cond, nvs_last_error());                                                \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* The call returns `want`. */
#define IS(want, call)                                                                  \
  do {                                                                                  \
    int got_ = (call);                                                                  \
    if (got_ != (want)) {                                                               \
      fprintf(stderr, "%s:%d: %s returned %s, wanted %s (last error: %s)\n", __FILE__, \
              __LINE__, #call, nvs_status_name(got_), nvs_status_name(want),            \
              nvs_last_error());                                                        \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#define OK(call) IS(NVS_OK, call)

#endif
