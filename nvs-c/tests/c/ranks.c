/* Writer processes on one pool, as MPI ranks are: a pool with lane names, RANKS child
 * processes (fork) each opening its own lane with nvs_pool_open_lane and putting the same
 * names ("temperature", "pressure") STEPS times, at once; then the parent reads every
 * rank's every step back through nvs_get_on / nvs_latest_on, byte-exact. Also: a lane a
 * live process holds is NVS_E_BUSY, NVS_ANY_LANE takes a free one, a pool without lane
 * names refuses writer processes (NVS_E_ARG), a write to another lane is NVS_E_BUSY, and
 * a read by a name several lanes hold is NVS_E_ARG; a follower reads each rank's objects
 * by the lane its events name (nvs_follower_get_on). argv[1]: a scratch directory. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define RANKS 4
#define STEPS 200

static void fill(uint8_t *buf, size_t len, uint32_t rank, uint64_t step, int which) {
  for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(i * 7 + step * 13 + rank * 101 + which * 31);
}

static size_t len_of(uint64_t step, int which) { return 500 + (size_t)((step * 977 + which * 311) % 9000); }

static int rank_main(const char *path, uint32_t rank) {
  struct nvs_pool *p = NULL;
  OK(nvs_pool_open_lane(path, rank, &p));
  uint32_t lane = 99;
  OK(nvs_pool_owned_lane(p, &lane));
  CHECK(lane == rank);
  static uint8_t buf[16384];
  for (uint64_t step = 1; step <= STEPS; step++) {
    const char *names[2] = {"temperature", "pressure"};
    for (int w = 0; w < 2; w++) {
      size_t len = len_of(step, w);
      fill(buf, len, rank, step, w);
      uint64_t v = 0;
      OK(nvs_put(p, rank, names[w], buf, len, &v));
      CHECK(v == step);
    }
  }
  /* Another rank's lane is not this process's to write. */
  uint64_t v = 0;
  IS(NVS_E_BUSY, nvs_put(p, (rank + 1) % RANKS, "temperature", buf, 8, &v));
  OK(nvs_pool_close(p));
  return 0;
}

struct names_seen {
  uint32_t temperature, pressure, other;
};

static int note_name(const char *name, size_t len, uint64_t latest, uint32_t versions, void *ctx) {
  struct names_seen *seen = ctx;
  CHECK(strlen(name) == len && latest == versions && versions >= STEPS);
  if (strcmp(name, "temperature") == 0)
    seen->temperature++;
  else if (strcmp(name, "pressure") == 0)
    seen->pressure++;
  else
    seen->other++;
  return 0;
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  char path[4096];
  snprintf(path, sizeof path, "%s/ranks.pool", argv[1]);
  struct nvs_create_options o = {0};
  o.segment_len = 64 << 10;
  o.lanes_max = 8;
  o.lane_names = 1;
  struct nvs_pool *p = NULL;
  OK(nvs_pool_create(path, 64 << 20, &o, &p));
  OK(nvs_pool_close(p));

  pid_t kids[RANKS];
  for (uint32_t r = 0; r < RANKS; r++) {
    kids[r] = fork();
    CHECK(kids[r] >= 0);
    if (kids[r] == 0) _exit(rank_main(path, r));
  }
  for (uint32_t r = 0; r < RANKS; r++) {
    int st = 0;
    CHECK(waitpid(kids[r], &st, 0) == kids[r]);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }

  OK(nvs_pool_open(path, NVS_OPEN_READ_ONLY, &p));
  static uint8_t want[16384], got[16384];
  for (uint32_t r = 0; r < RANKS; r++) {
    uint64_t latest = 0;
    OK(nvs_latest_on(p, r, "temperature", &latest));
    CHECK(latest == STEPS);
    for (uint64_t step = 1; step <= STEPS; step++) {
      const char *names[2] = {"temperature", "pressure"};
      for (int w = 0; w < 2; w++) {
        size_t len = len_of(step, w), n = 0;
        fill(want, len, r, step, w);
        OK(nvs_get_on(p, r, names[w], step, got, sizeof got, &n));
        CHECK(n == len && memcmp(want, got, len) == 0);
      }
    }
  }
  /* Every rank's names: each name once per lane; nvs_names_on lists one lane's. */
  struct names_seen all = {0};
  OK(nvs_names(p, note_name, &all));
  CHECK(all.temperature == RANKS && all.pressure == RANKS && all.other == 0);
  for (uint32_t r = 0; r < RANKS + 1; r++) {
    struct names_seen one = {0};
    OK(nvs_names_on(p, r, note_name, &one));
    uint32_t want_n = r < RANKS ? 1 : 0;
    CHECK(one.temperature == want_n && one.pressure == want_n && one.other == 0);
  }
  size_t n = 0;
  IS(NVS_E_ARG, nvs_get(p, "temperature", 1, got, sizeof got, &n)); /* RANKS lanes hold it */
  IS(NVS_E_NOT_FOUND, nvs_get_on(p, RANKS, "temperature", 1, got, sizeof got, &n));
  IS(NVS_E_ARG, nvs_get_on(p, 8, "temperature", 1, got, sizeof got, &n)); /* lanes_max 8 */
  OK(nvs_pool_close(p));

  /* A follower reads every rank's every step by the event's lane (by name alone it is
   * ambiguous: every rank has a "temperature"), then sees the end of the stream. */
  nvs_follower *f = NULL;
  OK(nvs_follower_open(path, NULL, &f));
  nvs_event ev;
  int objects = 0;
  for (;;) {
    OK(nvs_follower_wait(f, 5000, &ev));
    if (ev.kind != NVS_EVENT_OBJECT) break;
    int w = strcmp(ev.name, "pressure") == 0;
    CHECK(w || strcmp(ev.name, "temperature") == 0);
    CHECK(ev.lane < RANKS && ev.version >= 1 && ev.version <= STEPS);
    IS(NVS_E_ARG, nvs_follower_get(f, ev.name, ev.version, got, sizeof got, &n));
    OK(nvs_follower_get_on(f, ev.lane, ev.name, ev.version, got, sizeof got, &n));
    size_t len = len_of(ev.version, w);
    fill(want, len, ev.lane, ev.version, w);
    CHECK(n == len && ev.len == len && memcmp(want, got, len) == 0);
    objects++;
  }
  CHECK(ev.kind == NVS_EVENT_END_OF_STREAM);
  CHECK(objects == RANKS * STEPS * 2);
  IS(NVS_E_ARG, nvs_follower_get_on(f, 8, "temperature", 1, got, sizeof got, &n));
  OK(nvs_follower_close(f));

  /* A lane held by a live process is busy; NVS_ANY_LANE takes the next free one. */
  struct nvs_pool *a = NULL, *b = NULL;
  OK(nvs_pool_open_lane(path, 2, &a));
  IS(NVS_E_BUSY, nvs_pool_open_lane(path, 2, &b));
  OK(nvs_pool_open_lane(path, NVS_ANY_LANE, &b));
  uint32_t lane = 99;
  OK(nvs_pool_owned_lane(b, &lane));
  CHECK(lane == 0);
  uint64_t v = 0;
  OK(nvs_put(b, 0, "temperature", "next", 4, &v));
  CHECK(v == STEPS + 1);
  OK(nvs_pool_close(b));
  OK(nvs_pool_close(a));

  /* Without lane names: one writer at a time, no writer processes per lane. */
  char plain[4096];
  snprintf(plain, sizeof plain, "%s/plain.pool", argv[1]);
  OK(nvs_pool_create(plain, 4 << 20, NULL, &p));
  OK(nvs_pool_close(p));
  IS(NVS_E_ARG, nvs_pool_open_lane(plain, 0, &a));
  printf("ranks: %d writer processes x %d steps x 2 names on one pool, all read back\n", RANKS, STEPS);
  return 0;
}
