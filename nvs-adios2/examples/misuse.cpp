// The nvs engine used wrongly, carelessly or against a damaged pool: every case must end
// in an exception with a clear message (never a crash, a hang or wrong data), and nothing
// committed is lost. Each case runs in a child process, so a crash is a failed case.
//   misuse DIR      (an empty directory for the pools)
#include <adios2.h>

#include <cmath>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nvs.h"

namespace
{

std::string g_dir;
int g_failed = 0;

std::string Path(const std::string &name) { return g_dir + "/" + name; }

adios2::IO NvsIO(adios2::ADIOS &adios, const std::string &pool, adios2::Params extra = {})
{
    static int n = 0;
    adios2::IO io = adios.DeclareIO("io" + std::to_string(n++));
    io.SetEngine("Plugin");
    adios2::Params p = {{"PluginName", "nvs"},
                        {"PluginLibrary", "nvs_adios2"},
                        {"PoolPath", pool},
                        {"PoolSize", "8M"}};
    for (const auto &kv : extra)
        p[kv.first] = kv.second;
    io.SetParameters(p);
    return io;
}

/* `steps` steps of "x" (4 doubles, step s holds s) to `pool` in `mode`. */
void WriteSteps(const std::string &pool, size_t steps, adios2::Mode mode, adios2::Params extra = {})
{
    adios2::ADIOS adios;
    adios2::IO io = NvsIO(adios, pool, extra);
    auto v = io.DefineVariable<double>("x", {4}, {0}, {4});
    adios2::Engine w = io.Open(pool, mode);
    for (size_t s = 0; s < steps; ++s)
    {
        std::vector<double> d(4, double(w.CurrentStep()));
        w.BeginStep();
        w.Put(v, d.data(), adios2::Mode::Sync);
        w.EndStep();
    }
    w.Close();
}

/* How many steps a reader gets before the end of the stream (every value checked). */
size_t CountSteps(const std::string &pool)
{
    adios2::ADIOS adios;
    adios2::IO io = NvsIO(adios, pool, {{"Timeout", "5"}});
    adios2::Engine r = io.Open(pool, adios2::Mode::Read);
    size_t n = 0;
    while (r.BeginStep() == adios2::StepStatus::OK)
    {
        auto v = io.InquireVariable<double>("x");
        std::vector<double> d(4);
        r.Get(v, d.data(), adios2::Mode::Sync);
        for (double x : d)
            if (x != double(n))
                throw std::runtime_error("step " + std::to_string(n) + " holds " + std::to_string(x));
        r.EndStep();
        ++n;
    }
    r.Close();
    return n;
}

/* Run `body` in a child; it passes if it returns normally (it throws on a wrong result),
 * with `seconds` to do it. */
void Case(const std::string &what, const std::function<void()> &body, int seconds = 20)
{
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
    {
        alarm(seconds);
        try
        {
            body();
        }
        catch (const std::exception &e)
        {
            std::printf("  %s: unexpected exception: %s\n", what.c_str(), e.what());
            std::fflush(stdout);
            _exit(1);
        }
        std::fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        std::printf("ok   %s\n", what.c_str());
    else
    {
        ++g_failed;
        std::printf("FAIL %s (%s %d)\n", what.c_str(), WIFSIGNALED(st) ? "signal" : "exit",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
}

/* `body` must throw an exception whose message holds `needle`. */
void Throws(const std::string &needle, const std::function<void()> &body)
{
    try
    {
        body();
    }
    catch (const std::exception &e)
    {
        if (std::string(e.what()).find(needle) == std::string::npos)
            throw std::runtime_error(std::string("the message does not say \"") + needle +
                                     "\": " + e.what());
        std::string shown;
        for (char c : std::string(e.what()))
            shown += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
        std::printf("       (%s)\n", shown.c_str());
        return;
    }
    throw std::runtime_error("no exception (expected one saying \"" + needle + "\")");
}

void Require(bool ok, const std::string &what)
{
    if (!ok)
        throw std::runtime_error(what);
}

bool Exists(const std::string &p)
{
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 2)
    {
        std::fprintf(stderr, "usage: misuse DIR\n");
        return 64;
    }
    g_dir = argv[1];

    Case("Write with a bad PoolSize over a pool keeps the pool and its steps", [] {
        const std::string p = Path("keep.nvs");
        WriteSteps(p, 3, adios2::Mode::Write);
        for (const char *size : {"64MB", "x", "-1", "99999999999G", "1K"})
            Throws(size == std::string("1K") ? "too small" : "PoolSize", [&] {
                WriteSteps(p, 1, adios2::Mode::Write, {{"PoolSize", size}, {"Replace", "true"}});
            });
        Require(CountSteps(p) == 3, "the old pool lost steps");
        // a second Write of one PoolPath in one process: refused unless said on purpose
        Throws("already wrote", [&] { WriteSteps(p, 2, adios2::Mode::Write); });
        Require(CountSteps(p) == 3, "the refused Write changed the pool");
        WriteSteps(p, 2, adios2::Mode::Write, {{"Replace", "true"}}); // a good Write replaces it
        Require(CountSteps(p) == 2, "a Write did not start a new stream");
    });

    Case("a reader of a pool a Write replaced errors, it does not wait for ever", [] {
        const std::string p = Path("replaced.nvs");
        WriteSteps(p, 2, adios2::Mode::Write, {{"EndStream", "false"}}); // detached
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, p);
        adios2::Engine r = io.Open(p, adios2::Mode::Read);
        for (int s = 0; s < 2; ++s)
        {
            Require(r.BeginStep() == adios2::StepStatus::OK, "a committed step");
            r.EndStep();
        }
        std::thread([p] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            WriteSteps(p, 1, adios2::Mode::Write, {{"Replace", "true"}});
        }).detach();
        Throws("was replaced", [&] { r.BeginStep(); });
        r.Close();
    });

    Case("span puts are refused", [] {
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, Path("span.nvs"));
        auto v = io.DefineVariable<double>("x", {3}, {0}, {3});
        adios2::Engine w = io.Open(Path("span.nvs"), adios2::Mode::Write);
        w.BeginStep();
        Throws("span puts are not supported", [&] { w.Put(v); });
        w.EndStep();
        w.Close();
    });

    Case("two blocks of a local array in one step are read back block by block", [] {
        const std::string p = Path("local.nvs");
        {
            adios2::ADIOS adios;
            adios2::IO io = NvsIO(adios, p);
            auto v = io.DefineVariable<double>("loc", {}, {}, {3});
            adios2::Engine w = io.Open(p, adios2::Mode::Write);
            std::vector<double> a{1, 2, 3}, b{4, 5, 6};
            w.BeginStep();
            w.Put(v, a.data(), adios2::Mode::Sync);
            w.Put(v, b.data(), adios2::Mode::Sync);
            w.EndStep();
            w.Close();
        }
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, p);
        adios2::Engine r = io.Open(p, adios2::Mode::Read);
        Require(r.BeginStep() == adios2::StepStatus::OK, "a step");
        auto v = io.InquireVariable<double>("loc");
        std::vector<double> d(3);
        Throws("local array", [&] { r.Get(v, d.data(), adios2::Mode::Sync); });
        v.SetBlockSelection(1);
        r.Get(v, d.data(), adios2::Mode::Sync);
        Require(d == std::vector<double>{4, 5, 6}, "block 1 (SetBlockSelection)");
        r.Get(v, d.data(), adios2::Selection::Block(0), adios2::Mode::Sync);
        Require(d == std::vector<double>{1, 2, 3}, "block 0 (a block Selection)");
        Throws("block 2 of 2", [&] { r.Get(v, d.data(), adios2::Selection::Block(2)); });
        auto blocks = r.BlocksInfo(v, r.CurrentStep());
        Require(blocks.size() == 2 && blocks[1].Count == adios2::Dims{3} && blocks[1].Min == 4 &&
                    blocks[1].Max == 6,
                "BlocksInfo");
        r.EndStep();
        r.Close();
    });

    Case("names the step index cannot hold are refused at Put", [] {
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, Path("names.nvs"));
        adios2::Engine w = io.Open(Path("names.nvs"), adios2::Mode::Write);
        double x = 1;
        w.BeginStep();
        for (const std::string &name :
             {std::string("a\tb"), std::string("a\nb"), std::string("x\0y", 3), std::string(256, 'n')})
        {
            auto v = io.DefineVariable<double>(name);
            Throws("name", [&] { w.Put(v, &x, adios2::Mode::Sync); });
        }
        w.EndStep();
        w.Close();
    });

    Case("a global shape too large for memory is an error", [] {
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, Path("huge.nvs"));
        auto a = io.DefineVariable<double>("a", {size_t(1) << 61}, {0}, {size_t(1) << 61});
        auto b = io.DefineVariable<double>("b", {size_t(1000000000000)}, {0}, {size_t(1000000000000)});
        adios2::Engine w = io.Open(Path("huge.nvs"), adios2::Mode::Write);
        std::vector<double> d{1, 2};
        w.BeginStep();
        Throws("does not fit in memory", [&] { w.Put(a, d.data(), adios2::Mode::Sync); });
        Throws("cannot allocate", [&] { w.Put(b, d.data(), adios2::Mode::Sync); });
        w.EndStep();
        w.Close();
    });

    Case("a reader selection past the shape (start + count wraps) is refused", [] {
        const std::string p = Path("sel.nvs");
        WriteSteps(p, 1, adios2::Mode::Write);
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, p);
        adios2::Engine r = io.Open(p, adios2::Mode::Read);
        Require(r.BeginStep() == adios2::StepStatus::OK, "a step");
        auto v = io.InquireVariable<double>("x");
        std::vector<double> d(2);
        for (size_t start : {~size_t(0), size_t(0xffffffffc0000000)})
        {
            v.SetSelection({{start}, {2}});
            Throws("outside shape", [&] { r.Get(v, d.data(), adios2::Mode::Sync); });
        }
        r.EndStep();
        r.Close();
    });

    Case("a step index that does not match its objects is an error, not a crash", [] {
        const std::string p = Path("forged.nvs");
        nvs_pool *pool = nullptr;
        nvs_create_options opts;
        std::memset(&opts, 0, sizeof opts);
        opts.lanes_max = 1;
        opts.lane_names = 1;
        Require(nvs_pool_create(p.c_str(), 8 << 20, &opts, &pool) == NVS_OK, "create");
        const std::string index = "nvs-adios2\t2\t1\t0\nv\tx\t<f8\tg\t2305843009213693952\n"
                                  "b\t0\t2305843009213693952\t0\t0\t\t\n";
        nvs_object o[2];
        std::memset(o, 0, sizeof o);
        o[0].name = "x"; // 0 bytes, but the index says 2^61 doubles
        o[1].name = "__adios2_step";
        o[1].data = index.data();
        o[1].len = index.size();
        Require(nvs_put_batch(pool, 0, o, 2, nullptr) == NVS_OK && nvs_pool_close(pool) == NVS_OK,
                "put");
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, p);
        adios2::Engine r = io.Open(p, adios2::Mode::Read);
        Require(r.BeginStep() == adios2::StepStatus::OK, "a step");
        auto v = io.InquireVariable<double>("x");
        std::vector<double> d(1);
        v.SetSelection({{0}, {1}});
        Throws("does not fit in memory", [&] { r.Get(v, d.data(), adios2::Mode::Sync); });
        r.EndStep();
        r.Close();
    });

    Case("EndStream and timeouts: clear values taken, others refused", [] {
        const std::string p = Path("params.nvs");
        WriteSteps(p, 1, adios2::Mode::Write, {{"EndStream", "False"}}); // detaches
        {
            adios2::ADIOS adios;
            adios2::IO io = NvsIO(adios, p, {{"Timeout", "0.3"}});
            adios2::Engine r = io.Open(p, adios2::Mode::Read);
            Require(r.BeginStep() == adios2::StepStatus::OK, "step 0");
            r.EndStep();
            Require(r.BeginStep() == adios2::StepStatus::NotReady, "EndStream=False detached");
            r.Close();
        }
        {
            // Timeout=inf waits (it was taken as 0): a step that comes later is read.
            adios2::ADIOS adios;
            adios2::IO io = NvsIO(adios, p, {{"Timeout", "inf"}});
            adios2::Engine r = io.Open(p, adios2::Mode::Read);
            Require(r.BeginStep() == adios2::StepStatus::OK, "step 0");
            r.EndStep();
            std::thread([p] {
                std::this_thread::sleep_for(std::chrono::milliseconds(500));
                WriteSteps(p, 1, adios2::Mode::Append);
            }).detach();
            Require(r.BeginStep() == adios2::StepStatus::OK, "Timeout=inf gave up");
            r.EndStep();
            Require(r.BeginStep() == adios2::StepStatus::EndOfStream, "end of stream");
            r.Close();
        }
        for (const auto &kv : std::vector<std::pair<std::string, std::string>>{
                 {"EndStream", "maybe"}, {"Timeout", "2s"}, {"Timeout", "nan"}, {"OpenTimeout", "abc"},
                 {"KeepSteps", "-1"}, {"KeepSteps", "3 steps"}, {"KeepSteps", "99999999999"}})
        {
            adios2::ADIOS adios;
            adios2::IO io = NvsIO(adios, p, {{kv.first, kv.second}});
            Throws(kv.first, [&] { io.Open(p, adios2::Mode::Read); });
        }
    });

    Case("a reader of a file that is not a pool fails at once, not after OpenTimeout", [] {
        const std::string p = Path("junk.nvs");
        std::ofstream(p) << std::string(4096, 'j');
        mkdir(Path("dir.nvs").c_str(), 0755);
        for (const std::string &f : {p, Path("dir.nvs")})
        {
            adios2::ADIOS adios;
            adios2::IO io = NvsIO(adios, f, {{"OpenTimeout", "30"}});
            auto t0 = std::chrono::steady_clock::now();
            Throws("follow", [&] { io.Open(f, adios2::Mode::Read); });
            Require(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5),
                    "waited for a file that will never be a pool");
        }
        Require(!Exists(Path("never.nvs")), "setup");
    });

    Case("a variable whose type changes between steps is a clear error for a reader", [] {
        const std::string p = Path("retype.nvs");
        {
            adios2::ADIOS adios;
            adios2::IO io = NvsIO(adios, p);
            adios2::Engine w = io.Open(p, adios2::Mode::Write);
            double d = 1;
            int32_t i = 2;
            w.BeginStep();
            w.Put(io.DefineVariable<double>("x"), &d, adios2::Mode::Sync);
            w.EndStep();
            io.RemoveVariable("x");
            w.BeginStep();
            w.Put(io.DefineVariable<int32_t>("x"), &i, adios2::Mode::Sync);
            w.EndStep();
            w.Close();
        }
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, p);
        adios2::Engine r = io.Open(p, adios2::Mode::Read);
        Require(r.BeginStep() == adios2::StepStatus::OK, "step 0");
        r.EndStep();
        Throws("redefine a variable's type", [&] { r.BeginStep(); });
        r.Close();
    });

    Case("a Write over a pool a live writer holds is refused; the writer's steps are kept", [] {
        // Four ranks of one job writing one output each did this: the last rename won,
        // the others went on writing into files no name reached (one rank's data stored).
        const std::string p = Path("held.nvs");
        adios2::ADIOS a;
        adios2::IO io = NvsIO(a, p);
        auto v = io.DefineVariable<double>("x", {4}, {0}, {4});
        adios2::Engine w = io.Open(p, adios2::Mode::Write);
        for (size_t s = 0; s < 2; ++s)
        {
            std::vector<double> d(4, double(s));
            w.BeginStep();
            w.Put(v, d.data(), adios2::Mode::Sync);
            w.EndStep();
        }
        Throws("live writer", [&] { WriteSteps(p, 1, adios2::Mode::Write, {{"Replace", "true"}}); });
        std::vector<double> d(4, 2.0);
        w.BeginStep();
        w.Put(v, d.data(), adios2::Mode::Sync);
        w.EndStep();
        w.Close();
        Require(CountSteps(p) == 3, "the live writer's steps were not all kept");
    });

    Case("BlocksInfo's min and max are those one scan of the block finds (NaNs, lengths, types)", [] {
        const std::string p = Path("minmax.nvs");
        const double nan = std::nan("");
        // lengths around the vector width, a NaN first, in the middle, last; negatives
        std::vector<std::vector<double>> ds;
        for (size_t n : {1, 2, 7, 8, 9, 31, 32, 33, 100})
        {
            std::vector<double> d(n);
            for (size_t i = 0; i < n; ++i)
                d[i] = double((i * 7919) % 101) - 50.0;
            ds.push_back(d);
        }
        ds.push_back({nan, 1, 2, 3, 4, 5, 6, 7, 8, 9, -3});
        ds.push_back({1, 2, nan, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -4, 13, 14, 15, 16, 17});
        ds.push_back({5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, nan});
        std::vector<int32_t> is(37);
        for (size_t i = 0; i < is.size(); ++i)
            is[i] = int32_t((i * 31) % 17) - 8;
        {
            adios2::ADIOS adios;
            adios2::IO io = NvsIO(adios, p);
            auto vd = io.DefineVariable<double>("d", {}, {}, {1});
            auto vi = io.DefineVariable<int32_t>("i", {}, {}, {is.size()});
            adios2::Engine w = io.Open(p, adios2::Mode::Write);
            w.BeginStep();
            for (auto &d : ds)
            {
                vd.SetSelection({{}, {d.size()}});
                w.Put(vd, d.data(), adios2::Mode::Sync);
            }
            w.Put(vi, is.data(), adios2::Mode::Sync);
            w.EndStep();
            w.Close();
        }
        auto scan = [](const auto &v) {
            auto lo = v[0], hi = v[0];
            for (auto x : v)
            {
                if (x < lo)
                    lo = x;
                if (hi < x)
                    hi = x;
            }
            return std::make_pair(lo, hi);
        };
        auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
        adios2::ADIOS adios;
        adios2::IO io = NvsIO(adios, p);
        adios2::Engine r = io.Open(p, adios2::Mode::Read);
        Require(r.BeginStep() == adios2::StepStatus::OK, "a step");
        auto bd = r.BlocksInfo(io.InquireVariable<double>("d"), r.CurrentStep());
        Require(bd.size() == ds.size(), "a block per Put");
        for (size_t b = 0; b < ds.size(); ++b)
        {
            const auto mm = scan(ds[b]);
            Require(same(bd[b].Min, mm.first) && same(bd[b].Max, mm.second),
                    "block " + std::to_string(b) + ": min " + std::to_string(bd[b].Min) + " max " +
                        std::to_string(bd[b].Max));
        }
        auto bi = r.BlocksInfo(io.InquireVariable<int32_t>("i"), r.CurrentStep());
        const auto mi = scan(is);
        Require(bi.size() == 1 && bi[0].Min == mi.first && bi[0].Max == mi.second, "int32 min/max");
        r.EndStep();
        r.Close();
    });

    Case("an attribute name the step index cannot hold is refused at EndStep, nothing committed", [] {
        const std::string p = Path("attrs.nvs");
        WriteSteps(p, 1, adios2::Mode::Write);
        adios2::ADIOS a;
        adios2::IO io = NvsIO(a, p);
        io.DefineAttribute<std::string>("units\tK", "K");
        auto v = io.DefineVariable<double>("x", {4}, {0}, {4});
        adios2::Engine w = io.Open(p, adios2::Mode::Append);
        std::vector<double> d(4, 1.0);
        w.BeginStep();
        w.Put(v, d.data(), adios2::Mode::Sync);
        Throws("cannot be part of its name", [&] { w.EndStep(); });
        w.Close();
        Require(CountSteps(p) == 1, "a step with a bad attribute was committed");
    });

    if (g_failed)
    {
        std::printf("misuse: %d case(s) FAILED\n", g_failed);
        return 1;
    }
    std::printf("misuse: every case ended in a clear error, nothing committed was lost\n");
    return 0;
}
