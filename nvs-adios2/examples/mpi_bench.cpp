// The snapshot workload through ADIOS2, for comparing engines: every rank writes its
// block of a 1-D global array of doubles per step; then one process reads every step
// back whole. Nothing in it names an engine; the XML config chooses one.
//   mpirun -np N mpi_bench CONFIG.xml PATH STEPS MIB_PER_RANK
// Prints (rank 0): engine ranks MiB/rank, Open ms (slowest rank), write ms per step
// (BeginStep..EndStep, slowest rank), Close ms, read ms per step (one reader, Get whole
// array), and whether every value read was right.
#include <adios2.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace
{
double Now()
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

double Slowest(double ms)
{
    double max = 0;
    MPI_Allreduce(&ms, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}
} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 5)
    {
        std::fprintf(stderr, "usage: mpi_bench CONFIG.xml PATH STEPS MIB_PER_RANK\n");
        MPI_Abort(MPI_COMM_WORLD, 64);
    }
    const size_t steps = std::strtoul(argv[3], nullptr, 10);
    const size_t n = std::strtoul(argv[4], nullptr, 10) * (1 << 20) / sizeof(double);
    const size_t N = size, r = rank;
    int rc = 0;
    try
    {
        adios2::ADIOS adios(argv[1], MPI_COMM_WORLD);
        adios2::IO io = adios.DeclareIO("SimIO");
        auto v = io.DefineVariable<double>("snapshot", {n * N}, {n * r}, {n});
        std::vector<double> data(n);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = Now();
        adios2::Engine w = io.Open(argv[2], adios2::Mode::Write);
        const double open = Slowest(Now() - t0);
        double write = 0;
        for (size_t s = 0; s < steps; ++s)
        {
            for (size_t i = 0; i < n; ++i)
                data[i] = double(s) + double(n * r + i);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = Now();
            w.BeginStep();
            w.Put(v, data.data());
            w.EndStep();
            write += Slowest(Now() - t0);
        }
        t0 = Now();
        w.Close();
        const double close = Slowest(Now() - t0);
        MPI_Barrier(MPI_COMM_WORLD);
        double read = 0;
        size_t wrong = 0, got = 0;
        if (rank == 0)
        {
            adios2::IO rio = adios.DeclareIO("ReadIO");
            rio.SetEngine(io.EngineType());
            rio.SetParameters(io.Parameters());
            adios2::Engine rd = rio.Open(argv[2], adios2::Mode::Read, MPI_COMM_SELF);
            std::vector<double> all(n * N);
            for (;;)
            {
                t0 = Now();
                if (rd.BeginStep() != adios2::StepStatus::OK)
                    break;
                auto rv = rio.InquireVariable<double>("snapshot");
                rd.Get(rv, all.data(), adios2::Mode::Sync);
                rd.EndStep();
                read += Now() - t0;
                for (size_t i = 0; i < all.size(); ++i)
                    wrong += all[i] != double(got) + double(i);
                ++got;
            }
            rd.Close();
            std::printf("%-7s ranks %zu  %4zu MiB/rank  open %8.2f ms  write %8.2f ms/step  close %7.2f ms  "
                        "read %8.2f ms/step  %zu steps, %zu wrong\n",
                        io.EngineType().c_str(), N, n * sizeof(double) >> 20, open, write / steps,
                        close, got ? read / got : 0.0, got, wrong);
            if (wrong || got != steps)
                rc = 1;
        }
    }
    catch (std::exception &e)
    {
        std::fprintf(stderr, "mpi_bench rank %d: error: %s\n", rank, e.what());
        rc = 2;
    }
    MPI_Finalize();
    return rc;
}
