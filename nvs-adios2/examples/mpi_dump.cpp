// An ADIOS2 streaming reader that prints every value it reads, in one canonical text
// form, so that the dumps of two engines can be compared byte for byte (run it as one
// rank; the writer's rank count is learnt from what it wrote).
//   mpi_dump CONFIG.xml PATH
// Per step: every attribute; the whole temperature array; a box spanning every writer's rows; each block
// of temperature, pressure and particles (block Selections) with its BlocksInfo (start,
// count, min, max); the global value step; the local values rank_value (a 1-D array).
#include <adios2.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

namespace
{
std::string Dims(const adios2::Dims &d)
{
    std::string s;
    for (size_t i = 0; i < d.size(); ++i)
        s += (i ? "," : "") + std::to_string(d[i]);
    return "{" + s + "}";
}

template <class T>
void Values(const char *what, const std::vector<T> &v)
{
    std::printf("%s:", what);
    for (const T &x : v)
        std::printf(" %.17g", double(x));
    std::printf("\n");
}

template <class T>
void Blocks(adios2::Engine &r, adios2::Variable<T> v)
{
    auto info = r.BlocksInfo(v, r.CurrentStep());
    for (size_t b = 0; b < info.size(); ++b)
    {
        size_t n = 1;
        for (size_t c : info[b].Count)
            n *= c;
        std::vector<T> d(n);
        r.Get(v, d.data(), adios2::Selection::Block(b), adios2::Mode::Sync);
        std::printf("%s block %zu: start %s count %s min %.17g max %.17g\n", v.Name().c_str(), b,
                    Dims(info[b].Start).c_str(), Dims(info[b].Count).c_str(), double(info[b].Min),
                    double(info[b].Max));
        Values("  values", d);
    }
}
} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 3)
    {
        std::fprintf(stderr, "usage: mpi_dump CONFIG.xml PATH\n");
        MPI_Abort(MPI_COMM_WORLD, 64);
    }
    int rc = 0;
    size_t steps = 0;
    try
    {
        adios2::ADIOS adios(argv[1], MPI_COMM_SELF);
        adios2::IO io = adios.DeclareIO("SimIO");
        adios2::Engine r = io.Open(argv[2], adios2::Mode::Read, MPI_COMM_SELF);
        while (r.BeginStep(adios2::StepMode::Read, 60.0f) == adios2::StepStatus::OK)
        {
            std::printf("step %zu\n", r.CurrentStep());
            for (const auto &kv : io.AvailableAttributes())
            {
                std::printf("attribute %s (%s):", kv.first.c_str(), io.AttributeType(kv.first).c_str());
                if (auto a = io.InquireAttribute<std::string>(kv.first))
                    for (const std::string &e : a.Data())
                        std::printf(" \"%s\"", e.c_str());
                if (auto a = io.InquireAttribute<double>(kv.first))
                    for (double e : a.Data())
                        std::printf(" %.17g", e);
                if (auto a = io.InquireAttribute<int32_t>(kv.first))
                    for (int32_t e : a.Data())
                        std::printf(" %d", e);
                if (auto a = io.InquireAttribute<int64_t>(kv.first))
                    for (int64_t e : a.Data())
                        std::printf(" %lld", (long long)e);
                std::printf("\n");
            }
            auto vT = io.InquireVariable<double>("temperature");
            auto vP = io.InquireVariable<float>("pressure");
            auto vS = io.InquireVariable<int64_t>("step");
            auto vR = io.InquireVariable<int32_t>("rank_value");
            auto vL = io.InquireVariable<int32_t>("particles");
            if (!vT || !vP || !vS || !vR || !vL)
                throw std::runtime_error("a variable is missing");
            const adios2::Dims shape = vT.Shape();
            std::printf("temperature shape %s\n", Dims(shape).c_str());
            std::vector<double> t(shape[0] * shape[1]);
            r.Get(vT, t.data(), adios2::Mode::Sync);
            Values("temperature", t);
            // a box across every writer's rows: rows 1..shape-2, columns 2..4
            const adios2::Dims bs{1, 2}, bc{shape[0] - 2, 3};
            std::vector<double> box(bc[0] * bc[1]);
            vT.SetSelection({bs, bc});
            r.Get(vT, box.data(), adios2::Mode::Sync);
            Values("temperature box", box);
            // the same box into a larger buffer (a memory selection): one ghost cell around
            std::vector<double> ghost((bc[0] + 2) * (bc[1] + 2), -1.0);
            r.Get(vT, ghost.data(),
                  adios2::Selection::BoundingBox(bs, bc).WithMemory({1, 1}, {bc[0] + 2, bc[1] + 2}),
                  adios2::Mode::Sync);
            Values("temperature box in memory", ghost);
            Blocks(r, vT);
            Blocks(r, vP);
            Blocks(r, vL);
            int64_t s = -1;
            r.Get(vS, s, adios2::Mode::Sync);
            std::printf("step value: %lld\n", (long long)s);
            const adios2::Dims rs = vR.Shape();
            std::printf("rank_value shape %s\n", Dims(rs).c_str());
            std::vector<int32_t> rv(rs.empty() ? 0 : rs[0]);
            r.Get(vR, rv.data(), adios2::Mode::Sync);
            Values("rank_value", rv);
            r.EndStep();
            ++steps;
        }
        r.Close();
        std::printf("end of stream after %zu steps\n", steps);
    }
    catch (std::exception &e)
    {
        std::fflush(stdout);
        std::fprintf(stderr, "mpi_dump: after %zu steps: error: %s\n", steps, e.what());
        rc = 2;
    }
    MPI_Finalize();
    return rc;
}
