// An ADIOS2 streaming reader: nothing in it names an engine; the XML config chooses one.
//   reader CONFIG.xml PATH [EXPECTED_STEPS]
// Reads every step until the end of the stream, checks each value against what the
// writer derives from the step (and a 2x3 sub-array read by selection), and exits
// non-zero on any mismatch, a missing step, or an error (the nvs engine reports a
// writer that died as an error).
#include <adios2.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char **argv)
{
    if (argc < 3)
    {
        std::fprintf(stderr, "usage: reader CONFIG.xml PATH [EXPECTED_STEPS]\n");
        return 64;
    }
    const long expected = argc > 3 ? std::atol(argv[3]) : -1;
    size_t steps = 0, checked = 0, wrong = 0;
    std::string engine = "?";
    adios2::ADIOS adios(argv[1]);
    adios2::Engine r;
    try
    {
        adios2::IO io = adios.DeclareIO("SimIO");
        r = io.Open(argv[2], adios2::Mode::Read);
        engine = io.EngineType();
        for (;;)
        {
            adios2::StepStatus st = r.BeginStep(adios2::StepMode::Read, 60.0f);
            if (st == adios2::StepStatus::EndOfStream)
                break;
            if (st != adios2::StepStatus::OK)
            {
                std::fprintf(stderr, "reader: BeginStep: no step in 60 s\n");
                return 3;
            }
            const size_t s = r.CurrentStep();
            if (s != steps)
            {
                std::fprintf(stderr, "reader: step %zu where %zu was expected\n", s, steps);
                ++wrong;
            }
            auto vT = io.InquireVariable<double>("temperature");
            auto vS = io.InquireVariable<int64_t>("step");
            if (!vT || !vS)
            {
                std::fprintf(stderr, "reader: step %zu lacks a variable\n", s);
                return 1;
            }
            const adios2::Dims shape = vT.Shape();
            const size_t ny = shape[1];
            std::vector<double> t(shape[0] * shape[1]);
            vT.SetSelection({{0, 0}, shape});
            r.Get(vT, t.data(), adios2::Mode::Sync);
            for (size_t i = 0; i < t.size(); ++i, ++checked)
                if (t[i] != double(s) * 1000.0 + double(i))
                    ++wrong;
            std::vector<double> sub(2 * 3);
            vT.SetSelection({{1, 2}, {2, 3}});
            r.Get(vT, sub.data(), adios2::Mode::Sync);
            for (size_t a = 0; a < 2; ++a)
                for (size_t b = 0; b < 3; ++b, ++checked)
                    if (sub[a * 3 + b] != double(s) * 1000.0 + double((1 + a) * ny + 2 + b))
                        ++wrong;
            int64_t sv = -1;
            r.Get(vS, sv, adios2::Mode::Sync);
            ++checked;
            if (sv != int64_t(s))
                ++wrong;
            r.EndStep();
            ++steps;
        }
        r.Close();
    }
    catch (std::exception &e)
    {
        try
        {
            if (r)
                r.Close();
        }
        catch (...)
        {
        }
        std::fprintf(stderr, "reader (%s): %zu steps read (%zu values checked, %zu wrong), then error: %s\n",
                     engine.c_str(), steps, checked, wrong, e.what());
        return 2;
    }
    std::printf("reader (%s): %zu steps, %zu values checked, %zu wrong; end of stream\n",
                engine.c_str(), steps, checked, wrong);
    if (wrong)
        return 1;
    if (expected >= 0 && long(steps) != expected)
    {
        std::fprintf(stderr, "reader: %zu steps, %ld expected\n", steps, expected);
        return 1;
    }
    return 0;
}
