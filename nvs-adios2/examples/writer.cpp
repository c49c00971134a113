// An ADIOS2 writer: nothing in it names an engine; the XML config chooses one.
//   writer CONFIG.xml PATH NSTEPS [--append] [--sleep MS]
// Step s writes "temperature" (NX x NY doubles, s*1000 + i*NY + j) and "step" (s), where
// s is the engine's CurrentStep(): a writer that appends continues the sequence.
#include <adios2.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char **argv)
{
    if (argc < 4)
    {
        std::fprintf(stderr, "usage: writer CONFIG.xml PATH NSTEPS [--append] [--sleep MS]\n");
        return 64;
    }
    const size_t NX = 16, NY = 32;
    const size_t nsteps = std::strtoul(argv[3], nullptr, 10);
    bool append = false;
    int sleepMs = 0;
    for (int i = 4; i < argc; ++i)
    {
        if (!std::strcmp(argv[i], "--append"))
            append = true;
        else if (!std::strcmp(argv[i], "--sleep") && i + 1 < argc)
            sleepMs = std::atoi(argv[++i]);
    }
    try
    {
        adios2::ADIOS adios(argv[1]);
        adios2::IO io = adios.DeclareIO("SimIO");
        auto vT = io.DefineVariable<double>("temperature", {NX, NY}, {0, 0}, {NX, NY});
        auto vS = io.DefineVariable<int64_t>("step");
        adios2::Engine w = io.Open(argv[2], append ? adios2::Mode::Append : adios2::Mode::Write);
        std::vector<double> t(NX * NY);
        size_t first = 0, last = 0;
        for (size_t k = 0; k < nsteps; ++k)
        {
            w.BeginStep();
            const size_t s = w.CurrentStep();
            if (k == 0)
                first = s;
            last = s;
            for (size_t i = 0; i < NX * NY; ++i)
                t[i] = double(s) * 1000.0 + double(i);
            w.Put(vT, t.data());
            w.Put(vS, int64_t(s));
            w.EndStep();
            if (sleepMs)
                std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
        }
        w.Close();
        std::printf("writer (%s): steps %zu..%zu (%zu steps of %zux%zu doubles)\n",
                    io.EngineType().c_str(), first, last, nsteps, NX, NY);
    }
    catch (std::exception &e)
    {
        std::fprintf(stderr, "writer: error: %s\n", e.what());
        return 2;
    }
    return 0;
}
