#!/usr/bin/env python3
"""An ADIOS2 writer in Python: nothing in it names an engine; the XML config chooses one.

    writer.py CONFIG.xml PATH NSTEPS [--append] [--sleep MS]

Step s writes "temperature" (16 x 32 doubles, s*1000 + i*32 + j) and "step" (s), where s
is the engine's current step: a writer that appends continues the sequence."""
import sys
import time

import numpy as np
import adios2

NX, NY = 16, 32


def main():
    if len(sys.argv) < 4:
        print("usage: writer.py CONFIG.xml PATH NSTEPS [--append] [--sleep MS]", file=sys.stderr)
        return 64
    config, path, nsteps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    append = "--append" in sys.argv[4:]
    sleep = float(sys.argv[sys.argv.index("--sleep") + 1]) / 1000 if "--sleep" in sys.argv else 0
    adios = adios2.Adios(config)
    io = adios.declare_io("SimIO")
    steps = []
    with adios2.Stream(io, path, "a" if append else "w") as out:
        for _ in out.steps(nsteps):
            s = out.current_step()
            steps.append(s)
            t = (s * 1000.0 + np.arange(NX * NY, dtype=np.float64)).reshape(NX, NY)
            out.write("temperature", t, [NX, NY], [0, 0], [NX, NY])
            out.write("step", int(s))  # a Python int: an int64_t value
            if sleep:
                time.sleep(sleep)
    print(f"writer.py ({io.engine_type()}): steps {steps[0]}..{steps[-1]} ({nsteps} steps of {NX}x{NY} doubles)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
