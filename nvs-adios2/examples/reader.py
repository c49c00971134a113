#!/usr/bin/env python3
"""An ADIOS2 streaming reader in Python: nothing in it names an engine; the XML config
chooses one.

    reader.py CONFIG.xml PATH [EXPECTED_STEPS]

Reads every step to the end of the stream, checks each value against what the writer
derives from the step (and a 2x3 sub-array read by selection), exits non-zero on any
mismatch, a missing step or an error (the nvs engine reports a dead writer as one)."""
import sys

import numpy as np
import adios2


def main():
    if len(sys.argv) < 3:
        print("usage: reader.py CONFIG.xml PATH [EXPECTED_STEPS]", file=sys.stderr)
        return 64
    config, path = sys.argv[1], sys.argv[2]
    expected = int(sys.argv[3]) if len(sys.argv) > 3 else None
    adios = adios2.Adios(config)
    io = adios.declare_io("SimIO")
    steps = checked = wrong = 0
    try:
        with adios2.Stream(io, path, "r") as inp:
            for _ in inp.steps(timeout=60.0):
                s = inp.current_step()
                if s != steps:
                    print(f"reader.py: step {s} where {steps} was expected", file=sys.stderr)
                    wrong += 1
                t = inp.read("temperature")
                nx, ny = t.shape
                want = s * 1000.0 + np.arange(nx * ny, dtype=np.float64).reshape(nx, ny)
                wrong += int(np.count_nonzero(t != want))
                checked += t.size
                sub = inp.read("temperature", [1, 2], [2, 3])
                wrong += int(np.count_nonzero(sub != want[1:3, 2:5]))
                checked += sub.size
                sv = inp.read("step")
                checked += 1
                wrong += int(sv != s)
                steps += 1
            if inp.step_status() != adios2.bindings.StepStatus.EndOfStream:
                print(f"reader.py: the loop ended with {inp.step_status()}", file=sys.stderr)
                return 3
    except Exception as e:  # the nvs engine raises when the writer died
        print(f"reader.py ({io.engine_type()}): {steps} steps read ({checked} values checked, "
              f"{wrong} wrong), then error: {e}", file=sys.stderr)
        return 2
    print(f"reader.py ({io.engine_type()}): {steps} steps, {checked} values checked, {wrong} wrong; end of stream")
    if wrong:
        return 1
    if expected is not None and steps != expected:
        print(f"reader.py: {steps} steps, {expected} expected", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
