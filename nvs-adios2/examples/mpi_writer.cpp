// An MPI ADIOS2 writer: nothing in it names an engine; the XML config chooses one.
//   mpirun -np N mpi_writer CONFIG.xml PATH NSTEPS [--append] [--sleep MS] [--die RANK STEP]
//                                                  [--only K]
// Per step s, rank r of N writes:
//   temperature  a global array of doubles {4N, 6}: rows 4r..4r+3 (one block per rank)
//   pressure     a global array of floats {10N}: two blocks per rank (3 and 7 values)
//   step         a global value (s)
//   rank_value   a local value (100 s + r)
//   particles    a local array of int32 (r + 2 values)
// and the attributes units, origin, ranks, temperature/description and last_step (s,
// modified each step). Values derive from (s, r, index): a reader can check every one. --die RANK STEP: that
// rank exits (no Close) inside step STEP, after its Puts, before its EndStep, a second
// after the others have committed that step. --only K: only ranks 0..K-1 open the output
// (with a communicator of their own).
#include <adios2.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4)
    {
        std::fprintf(stderr, "usage: mpi_writer CONFIG.xml PATH NSTEPS [--append] [--sleep MS] "
                             "[--die RANK STEP]\n");
        MPI_Abort(MPI_COMM_WORLD, 64);
    }
    const size_t nsteps = std::strtoul(argv[3], nullptr, 10);
    bool append = false;
    int sleepMs = 0;
    long dieRank = -1, dieStep = -1;
    int only = 0;
    for (int i = 4; i < argc; ++i)
    {
        if (!std::strcmp(argv[i], "--append"))
            append = true;
        else if (!std::strcmp(argv[i], "--sleep") && i + 1 < argc)
            sleepMs = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
            only = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--die") && i + 2 < argc)
        {
            dieRank = std::atol(argv[++i]);
            dieStep = std::atol(argv[++i]);
        }
    }
    MPI_Comm comm = MPI_COMM_WORLD;
    if (only > 0)
    {
        MPI_Comm_split(MPI_COMM_WORLD, rank < only ? 0 : 1, rank, &comm);
        if (rank >= only)
        {
            MPI_Finalize();
            return 0;
        }
        size = only;
    }
    const size_t N = size, r = rank, ROWS = 4, COLS = 6;
    int rc = 0;
    try
    {
        adios2::ADIOS adios(argv[1], comm);
        adios2::IO io = adios.DeclareIO("SimIO");
        auto vT = io.DefineVariable<double>("temperature", {ROWS * N, COLS}, {ROWS * r, 0}, {ROWS, COLS});
        auto vP = io.DefineVariable<float>("pressure", {10 * N}, {10 * r}, {3});
        auto vS = io.DefineVariable<int64_t>("step");
        auto vR = io.DefineVariable<int32_t>("rank_value", {adios2::LocalValueDim});
        auto vL = io.DefineVariable<int32_t>("particles", {}, {}, {r + 2});
        io.DefineAttribute<std::string>("units", "K");
        const double origin[2] = {0.5, 1.5};
        io.DefineAttribute<double>("origin", origin, 2);
        io.DefineAttribute<int32_t>("ranks", int32_t(N));
        io.DefineAttribute<std::string>("description", "temperature by row", "temperature");
        adios2::Engine w = io.Open(argv[2], append ? adios2::Mode::Append : adios2::Mode::Write, comm);
        size_t first = 0, last = 0;
        for (size_t k = 0; k < nsteps; ++k)
        {
            w.BeginStep();
            const size_t s = w.CurrentStep();
            io.DefineAttribute<int64_t>("last_step", int64_t(s), "", "/", true); // modified
            if (k == 0)
                first = s;
            last = s;
            std::vector<double> t(ROWS * COLS);
            for (size_t i = 0; i < t.size(); ++i)
                t[i] = double(s) * 1e4 + double((ROWS * r + i / COLS) * COLS + i % COLS);
            w.Put(vT, t.data()); // deferred: t is read at EndStep
            std::vector<float> p(10);
            for (size_t i = 0; i < 10; ++i)
                p[i] = float(s) * 100.0f + float(10 * r + i) + 0.5f;
            vP.SetSelection({{10 * r}, {3}});
            w.Put(vP, p.data(), adios2::Mode::Sync);
            vP.SetSelection({{10 * r + 3}, {7}});
            w.Put(vP, p.data() + 3, adios2::Mode::Sync);
            w.Put(vS, int64_t(s));
            w.Put(vR, int32_t(100 * s + r));
            std::vector<int32_t> parts(r + 2);
            for (size_t i = 0; i < parts.size(); ++i)
                parts[i] = int32_t(1000 * s + 10 * r + i);
            w.Put(vL, parts.data()); // deferred, then PerformPuts: the buffer is free after it
            w.PerformPuts();
            for (int32_t &x : parts)
                x = -1;
            if (long(r) == dieRank && long(s) == dieStep)
            {
                // a rank dies inside a step the others commit: no EndStep, no Close (the
                // launcher then kills the others, waiting in the barrier below)
                std::fflush(stdout);
                std::this_thread::sleep_for(std::chrono::milliseconds(1000));
                _exit(9);
            }
            w.EndStep();
            if (dieRank >= 0)
                MPI_Barrier(MPI_COMM_WORLD); // every rank has committed step s
            if (sleepMs)
                std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
        }
        w.Close();
        if (rank == 0)
            std::printf("mpi_writer (%s, %zu ranks): steps %zu..%zu\n", io.EngineType().c_str(), N,
                        first, last);
    }
    catch (std::exception &e)
    {
        std::fprintf(stderr, "mpi_writer rank %d: error: %s\n", rank, e.what());
        rc = 2;
    }
    MPI_Finalize();
    return rc;
}
