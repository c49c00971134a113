#!/usr/bin/env python3
"""An ADIOS2 streaming reader in Python that prints every value it reads in one
canonical text form, to compare two engines' dumps byte for byte (what mpi_writer
wrote, from any number of ranks; the serial PyPI adios2 reads it).

    dump.py CONFIG.xml PATH

Per step: every attribute, the whole temperature array, a box across every writer's rows, BlocksInfo of
temperature and pressure (start, count, min, max), each block of the local array
particles (read by block id), the global value step and the local values rank_value."""
import sys

import adios2


def values(what, a):
    print(what + ":" + "".join(" %.17g" % float(x) for x in a.ravel()))


def main():
    if len(sys.argv) != 3:
        print("usage: dump.py CONFIG.xml PATH", file=sys.stderr)
        return 64
    adios = adios2.Adios(sys.argv[1])
    io = adios.declare_io("SimIO")
    steps = 0
    try:
        with adios2.Stream(io, sys.argv[2], "r") as inp:
            for _ in inp.steps(timeout=60.0):
                s = inp.current_step()
                print(f"step {s}")
                for name in sorted(inp.available_attributes()):
                    print(f"attribute {name}: {inp.read_attribute(name)!r}")
                t = inp.read("temperature")
                print("temperature shape {%s}" % ",".join(str(d) for d in t.shape))
                values("temperature", t)
                nx = t.shape[0]
                values("temperature box", inp.read("temperature", [1, 2], [nx - 2, 3]))
                for name in ("temperature", "pressure", "particles"):
                    for b, info in enumerate(inp.engine.blocks_info(name, s)):
                        print(f"{name} block {b}: start {{{info['Start']}}} count {{{info['Count']}}}"
                              f" min %.17g max %.17g" % (float(info["Min"]), float(info["Max"])))
                        if name == "particles":
                            # a block of its own size: Count() set to it (what BP5 does
                            # by itself, and a plugin engine cannot)
                            v = inp.inquire_variable(name)
                            v.set_block_selection(b)
                            v.set_selection([[], [int(c) for c in info["Count"].split(",")]])
                            values("  values", inp.read(v))
                print("step value: %d" % int(inp.read("step")))
                values("rank_value", inp.read("rank_value"))
                steps += 1
    except Exception as e:  # the nvs engine raises when a writer died
        sys.stdout.flush()
        print(f"dump.py: after {steps} steps: error: {e}", file=sys.stderr)
        return 2
    print(f"end of stream after {steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
