// peers: one HPC snapshot workload (N arrays of M bytes per step, every step made
// durable as each store defines it) through nvs and its peers, in one run.
//
//   nvs      one nvs_put_batch per step (one commit of the N arrays; returns durable)
//   nvs-nosum  the same on a pool made without payload checksums (as the others have none)
//   bp5      ADIOS2 BP5 on /dev/shm: BeginStep, Put per array (deferred), EndStep
//   hdf5     HDF5 (sec2 driver) on /dev/shm: a group per step, a dataset per array,
//            H5Fflush at the end of the step
//   posix    a file per rank per step on /dev/shm: open, write per array, close
//   pmemlog  libpmemlog on a /dev/shm pool file (PMEM_IS_PMEM_FORCE=1): an append per
//            array
//   memcpy   a memcpy of each array into a preallocated, pre-faulted buffer (no
//            durability: the "as fast as memcpy" reference)
//
// Ranks are processes (as MPI ranks are), forked before any library is initialised,
// each with its own pool/files. A step's time for R ranks is the wall time from the
// common start to the last rank's end of its steps, over the steps. Trials interleave
// (every peer and rank count of a case once per trial, in a shuffled order that changes
// from trial to trial), and each row is the median.
//
// Usage: peers [--quick] [--dir DIR] [--json FILE] [--trials N]
#include <adios2.h>
#include <hdf5.h>
#include <libpmemlog.h>
#include <nvs.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

static const char *PEERS[] = {"nvs", "nvs-nosum", "bp5", "hdf5", "posix", "pmemlog", "memcpy"};
static const int NPEERS = 7;
static const int MAXR = 2;

struct Case {
    const char *label;
    int n;      // arrays per step
    size_t m;   // bytes per array
};

enum Cmd { SETUP = 1, TRIAL, TEARDOWN, EXIT };

struct Ctl {
    pthread_barrier_t start, done;
    int cmd, peer, ranks, steps, case_idx;
    double t0[MAXR], t1[MAXR];
    int err[MAXR];
    char msg[MAXR][256];
};

static double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

[[noreturn]] static void fail(const std::string &what) { throw std::runtime_error(what); }

static void nvs_check(int32_t rc, const char *what) {
    if (rc != NVS_OK) fail(std::string(what) + ": " + nvs_status_name(rc) + ": " + nvs_last_error());
}

static size_t pow2_at_least(size_t x) {
    size_t p = 1;
    while (p < x) p <<= 1;
    return p;
}

// One rank's state for the current case.
struct Worker {
    int id = 0;
    std::string dir;
    std::vector<Case> cases;
    Case c{};
    size_t step_bytes = 0;
    std::vector<uint8_t> src, dst;
    std::vector<std::string> names;
    std::vector<nvs_object> objs;
    nvs_pool *pools[2] = {nullptr, nullptr};  // payload checksums on (the default), off
    PMEMlogpool *plp = nullptr;
    size_t pool_len = 0;
    adios2::ADIOS adios;
    adios2::IO io;
    std::vector<adios2::Variable<uint8_t>> vars;
    long step_no = 0;
    int trial_no = 0;

    std::string path(const std::string &leaf) const { return dir + "/peers.r" + std::to_string(id) + "." + leaf; }

    void setup(int ci) {
        c = cases[ci];
        step_bytes = (size_t)c.n * c.m;
        src.assign(step_bytes, 0);
        for (size_t i = 0; i < step_bytes; i++) src[i] = (uint8_t)(i * 2654435761u >> 13 ^ id);
        dst.assign(step_bytes, 1);
        names.clear();
        objs.assign(c.n, nvs_object{});
        for (int i = 0; i < c.n; i++) names.push_back("a" + std::to_string(i));
        for (int i = 0; i < c.n; i++) {
            objs[i].name = names[i].c_str();
            objs[i].data = src.data() + (size_t)i * c.m;
            objs[i].len = c.m;
        }
        // nvs: segments hold a whole step; the pool 8 segments, at least 256 MiB.
        size_t seg = std::max<size_t>(pow2_at_least(step_bytes + step_bytes / 8 + (size_t)c.n * 512), 4 << 20);
        pool_len = std::max<size_t>(8 * seg, 256u << 20);
        for (int k = 0; k < 2; k++) {
            std::string pp = path(k ? "nvs-nosum" : "nvs");
            unlink(pp.c_str());
            nvs_create_options o{};
            o.segment_len = seg;
            o.lanes_max = 1;
            o.no_payload_checksum = k;
            nvs_check(nvs_pool_create(pp.c_str(), pool_len, &o, &pools[k]), "nvs_pool_create");
            nvs_pool *pool = pools[k];
            // Fault every page of the pool in once (fill it, then reclaim), as a long run would.
            for (size_t put = 0; put < 2 * pool_len;) {
                int32_t rc = nvs_put_batch(pool, 0, objs.data(), objs.size(), nullptr);
                if (rc == NVS_E_FULL) {
                    nvs_check(nvs_reclaim(pool, 1, nullptr), "nvs_reclaim");
                    put += step_bytes;
                    continue;
                }
                nvs_check(rc, "nvs_put_batch");
                put += step_bytes;
            }
            nvs_check(nvs_reclaim(pool, 1, nullptr), "nvs_reclaim");
        }
        // pmemlog: the same size, filled once, rewound.
        std::string lp = path("pmemlog");
        unlink(lp.c_str());
        plp = pmemlog_create(lp.c_str(), pool_len, 0600);
        if (!plp) fail(std::string("pmemlog_create: ") + pmemlog_errormsg());
        while (pmemlog_append(plp, src.data(), c.m) == 0) {
        }
        pmemlog_rewind(plp);
        // ADIOS2: one IO per case, a variable per array.
        io = adios.DeclareIO("case" + std::to_string(ci));
        io.SetEngine("BP5");
        vars.clear();
        for (int i = 0; i < c.n; i++) vars.push_back(io.DefineVariable<uint8_t>(names[i], {c.m}, {0}, {c.m}));
    }

    void teardown() {
        for (int k = 0; k < 2; k++) {
            if (pools[k]) nvs_check(nvs_pool_close(pools[k]), "nvs_pool_close");
            pools[k] = nullptr;
        }
        // A pool's index checkpoint beside it (written at close when it holds many objects).
        for (const char *store : {"nvs", "nvs-nosum"}) {
            unlink(path(store).c_str());
            unlink((path(store) + ".nvs-index").c_str());
        }
        if (plp) pmemlog_close(plp);
        plp = nullptr;
        unlink(path("pmemlog").c_str());
        unlink(path("posix.s0").c_str());
        unlink(path("posix.s1").c_str());
        adios.RemoveAllIOs();
        vars.clear();
        src = {};
        dst = {};
    }

    void posix_step() {
        std::string p = path("posix.s" + std::to_string(step_no++ % 2));
        int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) fail("open " + p + ": " + strerror(errno));
        for (int i = 0; i < c.n; i++) {
            const uint8_t *b = src.data() + (size_t)i * c.m;
            size_t left = c.m;
            while (left) {
                ssize_t w = write(fd, b, left);
                if (w < 0) fail(std::string("write: ") + strerror(errno));
                b += w;
                left -= (size_t)w;
            }
        }
        if (close(fd) != 0) fail(std::string("close: ") + strerror(errno));
    }

    // Run `steps` steps of `peer`; the time between t0 and t1 is what is measured.
    void trial(int peer, int steps, double &t0, double &t1) {
        std::string p = PEERS[peer];
        trial_no++;
        if (p == "nvs" || p == "nvs-nosum") {
            nvs_pool *pool = pools[p == "nvs" ? 0 : 1];
            t0 = now();
            for (int s = 0; s < steps; s++) {
                int32_t rc = nvs_put_batch(pool, 0, objs.data(), objs.size(), nullptr);
                if (rc == NVS_E_FULL) {  // retention, timed: it is part of a long run
                    nvs_check(nvs_reclaim(pool, 1, nullptr), "nvs_reclaim");
                    rc = nvs_put_batch(pool, 0, objs.data(), objs.size(), nullptr);
                }
                nvs_check(rc, "nvs_put_batch");
            }
            t1 = now();
        } else if (p == "pmemlog") {
            t0 = now();
            for (int s = 0; s < steps; s++) {
                for (int i = 0; i < c.n; i++) {
                    if (pmemlog_append(plp, src.data() + (size_t)i * c.m, c.m) != 0) {
                        pmemlog_rewind(plp);  // full: start over, timed
                        if (pmemlog_append(plp, src.data() + (size_t)i * c.m, c.m) != 0)
                            fail(std::string("pmemlog_append: ") + pmemlog_errormsg());
                    }
                }
            }
            t1 = now();
        } else if (p == "memcpy") {
            t0 = now();
            for (int s = 0; s < steps; s++)
                for (int i = 0; i < c.n; i++) memcpy(dst.data() + (size_t)i * c.m, src.data() + (size_t)i * c.m, c.m);
            t1 = now();
            if (dst[step_bytes / 2] != src[step_bytes / 2]) fail("memcpy");
        } else if (p == "posix") {
            t0 = now();
            for (int s = 0; s < steps; s++) posix_step();
            t1 = now();
        } else if (p == "hdf5") {
            std::string fp = path("h5");
            hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
            H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
            hid_t f = H5Fcreate(fp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
            H5Pclose(fapl);
            if (f < 0) fail("H5Fcreate " + fp);
            hsize_t dims[1] = {c.m};
            hid_t space = H5Screate_simple(1, dims, nullptr);
            t0 = now();
            for (int s = 0; s < steps; s++) {
                std::string g = "s" + std::to_string(s);
                hid_t gid = H5Gcreate2(f, g.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
                if (gid < 0) fail("H5Gcreate2");
                for (int i = 0; i < c.n; i++) {
                    hid_t d = H5Dcreate2(gid, names[i].c_str(), H5T_NATIVE_UCHAR, space, H5P_DEFAULT, H5P_DEFAULT,
                                         H5P_DEFAULT);
                    if (d < 0) fail("H5Dcreate2");
                    if (H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, src.data() + (size_t)i * c.m) < 0)
                        fail("H5Dwrite");
                    H5Dclose(d);
                }
                H5Gclose(gid);
                if (H5Fflush(f, H5F_SCOPE_LOCAL) < 0) fail("H5Fflush");
            }
            t1 = now();
            H5Sclose(space);
            H5Fclose(f);
            unlink(fp.c_str());
        } else if (p == "bp5") {
            std::string bp = path("bp" + std::to_string(trial_no % 2) + ".bp");
            fs::remove_all(bp);
            adios2::Engine e = io.Open(bp, adios2::Mode::Write);
            t0 = now();
            for (int s = 0; s < steps; s++) {
                e.BeginStep();
                for (int i = 0; i < c.n; i++) e.Put(vars[i], src.data() + (size_t)i * c.m);
                e.EndStep();
            }
            t1 = now();
            e.Close();
            fs::remove_all(bp);
        }
    }
};

static void worker_main(Ctl *ctl, int id, const std::string &dir, const std::vector<Case> &cases) {
    Worker w;
    w.id = id;
    w.dir = dir;
    w.cases = cases;
    for (;;) {
        pthread_barrier_wait(&ctl->start);
        int cmd = ctl->cmd;
        if (cmd == EXIT) break;
        try {
            if (cmd == SETUP) w.setup(ctl->case_idx);
            else if (cmd == TEARDOWN) w.teardown();
            else if (cmd == TRIAL && id < ctl->ranks) w.trial(ctl->peer, ctl->steps, ctl->t0[id], ctl->t1[id]);
        } catch (const std::exception &e) {
            ctl->err[id] = 1;
            snprintf(ctl->msg[id], sizeof ctl->msg[id], "%s", e.what());
        }
        pthread_barrier_wait(&ctl->done);
    }
    _exit(0);
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static std::string cpu_name() {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    std::string r = "unknown CPU";
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            const char *c = strchr(line, ':');
            r = c ? c + 2 : line;
            r.erase(r.find_last_not_of("\n") + 1);
            break;
        }
    if (f) fclose(f);
    return r;
}

struct Row {
    int ci, ranks, peer;
    std::vector<double> step_s;  // per trial: seconds per step
    std::string err;
    double med = 0;
};

int main(int argc, char **argv) {
    // libpmemlog reads PMEM_IS_PMEM_FORCE when it loads: re-exec with it set.
    if (!getenv("PMEM_IS_PMEM_FORCE")) {
        setenv("PMEM_IS_PMEM_FORCE", "1", 1);
        execv("/proc/self/exe", argv);
        perror("execv");
        return 1;
    }
    bool quick = false;
    std::string dir = "/dev/shm", json;
    int trials = 0;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--quick") quick = true;
        else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
        else if (a == "--json" && i + 1 < argc) json = argv[++i];
        else if (a == "--trials" && i + 1 < argc) trials = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: peers [--quick] [--dir DIR] [--json FILE] [--trials N]\n");
            return 2;
        }
    }
    if (trials <= 0) trials = quick ? 3 : 7;
    const size_t target = quick ? (8u << 20) : (48u << 20);  // bytes per rank per trial
    std::vector<Case> cases = {
        {"32 KiB x 8", 8, 32u << 10},
        {"1 MiB x 8", 8, 1u << 20},
        {"20 MiB x 2", 2, 20u << 20},
        {"miniAMR 1000 x 4 KiB", 1000, 4u << 10},
    };

    Ctl *ctl = (Ctl *)mmap(nullptr, sizeof(Ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ctl == MAP_FAILED) return perror("mmap"), 1;
    memset(ctl, 0, sizeof *ctl);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&ctl->start, &ba, MAXR + 1);
    pthread_barrier_init(&ctl->done, &ba, MAXR + 1);
    pid_t pids[MAXR];
    fflush(stdout);
    // A rank that dies would leave the others waiting at a barrier forever: end the run.
    signal(SIGCHLD, [](int) {
        int st = 0;
        if (waitpid(-1, &st, WNOHANG) > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            const char m[] = "peers: a rank died\n";
            ssize_t w = write(2, m, sizeof m - 1);
            (void)w;
            _exit(1);
        }
    });
    for (int r = 0; r < MAXR; r++) {
        pids[r] = fork();
        if (pids[r] == 0) worker_main(ctl, r, dir, cases);
    }
    auto run = [&](int cmd) {
        ctl->cmd = cmd;
        for (int r = 0; r < MAXR; r++) ctl->err[r] = 0, ctl->t0[r] = ctl->t1[r] = 0;
        pthread_barrier_wait(&ctl->start);
        if (cmd == EXIT) return std::string();
        pthread_barrier_wait(&ctl->done);
        for (int r = 0; r < MAXR; r++)
            if (ctl->err[r]) return std::string(ctl->msg[r]);
        return std::string();
    };

    double t_start = now();
    double load0[3] = {0, 0, 0}, load1[3] = {0, 0, 0};
    getloadavg(load0, 3);
    std::vector<Row> rows;
    const int rank_counts[] = {1, 2};
    for (int ci = 0; ci < (int)cases.size(); ci++) {
        ctl->case_idx = ci;
        std::string e = run(SETUP);
        if (!e.empty()) {
            fprintf(stderr, "setup of %s failed: %s\n", cases[ci].label, e.c_str());
            run(TEARDOWN);
            continue;
        }
        size_t sb = (size_t)cases[ci].n * cases[ci].m;
        int steps = (int)std::clamp<size_t>(target / sb, 3, 2000);
        size_t first = rows.size();
        for (int rc : rank_counts)
            for (int p = 0; p < NPEERS; p++) rows.push_back(Row{ci, rc, p, {}, {}, 0});
        // trial 0 is a warm-up (not counted); then every row once per trial, in an order
        // shuffled afresh each trial (a fixed seed: the same orders every run). In one
        // fixed order a row always ran after the same others and paid for what they left:
        // the first nvs_put_batch after HDF5's trial took 2-5 ms more (in a profile: one
        // malloc of glibc's working through the free chunks HDF5 left, and a first copy
        // from a source pushed out of the caches), and in the round robin the checksummed
        // nvs row was always the first nvs row after it (posix, pmemlog and memcpy
        // between), which made checksums look 1.5-2x as costly as they are.
        std::vector<size_t> order;
        for (size_t k = first; k < rows.size(); k++) order.push_back(k);
        uint64_t seed = 0x9e3779b97f4a7c15u;
        for (int t = 0; t <= trials; t++) {
            for (size_t i = order.size(); t > 0 && i > 1; i--) {
                seed = seed * 6364136223846793005u + 1442695040888963407u;
                std::swap(order[i - 1], order[(seed >> 33) % i]);
            }
            for (size_t k : order) {
                Row &row = rows[k];
                if (!row.err.empty()) continue;
                ctl->peer = row.peer;
                ctl->ranks = row.ranks;
                ctl->steps = steps;
                std::string err = run(TRIAL);
                if (!err.empty()) {
                    row.err = err;
                    continue;
                }
                double t0 = 1e300, t1 = 0;
                for (int r = 0; r < row.ranks; r++) t0 = std::min(t0, ctl->t0[r]), t1 = std::max(t1, ctl->t1[r]);
                if (t > 0) row.step_s.push_back((t1 - t0) / steps);
            }
        }
        run(TEARDOWN);
        fprintf(stderr, "%s done (%d steps per trial, %.0f s so far)\n", cases[ci].label, steps, now() - t_start);
    }
    run(EXIT);
    for (int r = 0; r < MAXR; r++) waitpid(pids[r], nullptr, 0);
    getloadavg(load1, 3);
    double took = now() - t_start;

    for (Row &r : rows)
        if (r.err.empty() && !r.step_s.empty()) r.med = median(r.step_s);
    auto find = [&](int ci, int ranks, const char *peer) -> Row * {
        for (Row &r : rows)
            if (r.ci == ci && r.ranks == ranks && !strcmp(PEERS[r.peer], peer) && r.med > 0) return &r;
        return nullptr;
    };
    auto gbps = [&](const Row &r) {
        const Case &c = cases[r.ci];
        return (double)c.n * c.m * r.ranks / r.med / 1e9;
    };

    char date[64];
    time_t tt = time(nullptr);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&tt));
    utsname un;
    uname(&un);
    std::string cpu = cpu_name();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("nvs peers · %s · %s (%ld CPUs) · %s %s\n", date, cpu.c_str(), ncpu, un.sysname, un.release);
    printf("files in %s; ranks are processes, each its own pool/files; median of %d interleaved trials (after a warm-up)\n",
           dir.c_str(), trials);
    printf("load average %.2f %.2f %.2f at start, %.2f %.2f %.2f at end; took %.0f s\n", load0[0], load0[1], load0[2],
           load1[0], load1[1], load1[2], took);
    printf("step: N arrays of M bytes per rank, durable as the peer defines it; GB/s over all ranks;\n");
    printf("x nvs = the peer's time per step over nvs's (above 1: nvs is faster)\n\n");
    printf("%-22s %5s  %-9s %12s %9s %8s\n", "case", "ranks", "peer", "us/step", "GB/s", "x nvs");
    for (Row &r : rows) {
        const Case &c = cases[r.ci];
        if (r.med <= 0) {
            printf("%-22s %5d  %-9s %s\n", c.label, r.ranks, PEERS[r.peer],
                   r.err.empty() ? "no result" : ("FAILED: " + r.err).c_str());
            continue;
        }
        Row *n = find(r.ci, r.ranks, "nvs");
        printf("%-22s %5d  %-9s %12.1f %9.3f %8.2f\n", c.label, r.ranks, PEERS[r.peer], r.med * 1e6, gbps(r),
               n ? r.med / n->med : 0.0);
    }

    // The paper's claims and the goal, as rows.
    struct Claim {
        std::string text, result;
        bool met;
    };
    std::vector<Claim> claims;
    for (int rc : rank_counts) {
        Row *n = find(0, rc, "nvs"), *p = find(0, rc, "posix");
        if (n && p) {
            double x = p->med / n->med;
            char b[160];
            snprintf(b, sizeof b, "nvs %.2fx tmpfs (%.2f vs %.2f GB/s)", x, gbps(*n), gbps(*p));
            claims.push_back({"at 32 KiB nvs >= 2.6x tmpfs (write+close), " + std::to_string(rc) + " rank(s)", b, x >= 2.6});
        }
    }
    for (int ci = 0; ci < (int)cases.size(); ci++)
        for (int rc : rank_counts) {
            Row *n = find(ci, rc, "nvs"), *m = find(ci, rc, "memcpy");
            if (!n || !m) continue;
            double x = gbps(*n) / gbps(*m);
            char b[160];
            snprintf(b, sizeof b, "nvs %.2fx memcpy's GB/s (%.2f vs %.2f)", x, gbps(*n), gbps(*m));
            claims.push_back({std::string("snapshot as fast as memcpy (>= 0.95x), ") + cases[ci].label + ", " +
                                  std::to_string(rc) + " rank(s)",
                              b, x >= 0.95});
        }
    for (const char *base : {"nvs", "nvs-nosum"})
    for (int ci = 0; ci < (int)cases.size(); ci++)
        for (int rc : rank_counts) {
            Row *n = find(ci, rc, base);
            if (!n) continue;
            std::string behind;
            double worst = 1e300;
            for (int p = 1; p < NPEERS; p++) {
                if (!strcmp(PEERS[p], "memcpy") || !strcmp(PEERS[p], "nvs-nosum")) continue;
                Row *o = find(ci, rc, PEERS[p]);
                if (!o) continue;
                double x = o->med / n->med;
                worst = std::min(worst, x);
                if (x < 1) behind += std::string(behind.empty() ? "" : ", ") + PEERS[p];
            }
            char b[200];
            snprintf(b, sizeof b, "closest peer at %.2fx %s's time%s%s", worst, base, behind.empty() ? "" : "; behind ",
                     behind.c_str());
            claims.push_back({std::string("goal: ") + base + " ahead of every peer, " + cases[ci].label + ", " + std::to_string(rc) +
                                  " rank(s)",
                              b, behind.empty()});
        }
    printf("\n");
    for (auto &c : claims) printf("%-7s %-68s %s\n", c.met ? "met" : "MISSED", c.text.c_str(), c.result.c_str());

    if (!json.empty()) {
        FILE *f = fopen(json.c_str(), "w");
        if (!f) return perror(json.c_str()), 1;
        fprintf(f, "{\n  \"date\": \"%s\", \"cpu\": \"%s\", \"cpus\": %ld, \"kernel\": \"%s\", \"dir\": \"%s\",\n", date,
                cpu.c_str(), ncpu, un.release, dir.c_str());
        fprintf(f, "  \"trials\": %d, \"quick\": %s, \"seconds\": %.1f,\n  \"rows\": [\n", trials, quick ? "true" : "false",
                took);
        bool firstrow = true;
        for (Row &r : rows) {
            const Case &c = cases[r.ci];
            Row *n = find(r.ci, r.ranks, "nvs");
            fprintf(f, "%s    {\"case\": \"%s\", \"arrays\": %d, \"array_bytes\": %zu, \"ranks\": %d, \"peer\": \"%s\"",
                    firstrow ? "" : ",\n", c.label, c.n, c.m, r.ranks, PEERS[r.peer]);
            firstrow = false;
            if (r.med > 0) {
                fprintf(f, ", \"us_per_step\": %.3f, \"gbps\": %.4f, \"x_nvs\": %.4f, \"trials_us\": [", r.med * 1e6,
                        gbps(r), n ? r.med / n->med : 0.0);
                for (size_t i = 0; i < r.step_s.size(); i++) fprintf(f, "%s%.3f", i ? ", " : "", r.step_s[i] * 1e6);
                fprintf(f, "]}");
            } else {
                std::string e = r.err;
                for (char &ch : e)
                    if (ch == '"' || ch == '\\' || ch < ' ') ch = ' ';
                fprintf(f, ", \"error\": \"%s\"}", e.c_str());
            }
        }
        fprintf(f, "\n  ],\n  \"claims\": [\n");
        for (size_t i = 0; i < claims.size(); i++)
            fprintf(f, "    {\"claim\": \"%s\", \"met\": %s, \"result\": \"%s\"}%s\n", claims[i].text.c_str(),
                    claims[i].met ? "true" : "false", claims[i].result.c_str(), i + 1 < claims.size() ? "," : "");
        fprintf(f, "  ]\n}\n");
        fclose(f);
    }
    int rc = 0;
    for (Row &r : rows)
        if (!r.err.empty()) rc = 1;
    // _exit: the libraries the adios2 wheel and libhdf5 bring in (two libldap builds) crash
    // in their destructors at exit.
    fflush(stdout);
    fflush(stderr);
    _exit(rc);
}
