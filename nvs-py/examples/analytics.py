#!/usr/bin/env python3
"""Follow an nvs pool while a simulation writes it, and summarise what it wrote.

    python nvs-py/examples/analytics.py POOL [--name NAME] [--timeout S] [--demo]

For every committed object it reads the array (dtype and shape from the object's
metadata; plain bytes otherwise) and keeps per-name statistics; at the end of the stream
(or when the writer dies) it prints one line per name. With --demo it first creates POOL (a
new file) and starts a writer process of its own on it: 50 steps of a 64x64 float64 field and
a step counter, on two lanes.
"""

import argparse
import subprocess
import sys
import time

import numpy as np

import nvs

DEMO_WRITER = """
import sys, time, numpy as np, nvs
with nvs.open(sys.argv[1], write=True) as w:
    x = np.linspace(0, 2 * np.pi, 64)
    for step in range(50):
        field = np.sin(x[:, None] + 0.1 * step) * np.cos(x[None, :])
        w.put_array("temperature", 300 + field, meta={"units": "K"})
        w.put("step", str(step).encode(), lane=1)
        time.sleep(0.005)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pool")
    ap.add_argument("--name", help="follow only this name")
    ap.add_argument("--timeout", type=float, default=None, help="give up after S seconds with nothing new")
    ap.add_argument("--demo", action="store_true", help="start a demo writer on POOL (a new file) first")
    args = ap.parse_args()

    writer = None
    if args.demo:
        # Created here, written there: a follower waits on a pool no lane has joined yet.
        nvs.create(args.pool, 64 << 20).close(end_stream=False)
        writer = subprocess.Popen([sys.executable, "-c", DEMO_WRITER, args.pool])

    stats = {}  # name -> [versions, bytes, last array or None]
    start = time.monotonic()
    follower = nvs.follow(args.pool, name=args.name, timeout=args.timeout)
    ending = "end of stream"
    try:
        for obj in follower:
            s = stats.setdefault(obj.name, [0, 0, None])
            s[0] += 1
            s[1] += obj.len
            # The lane that wrote it: in a pool with lane names every rank has its own.
            meta = follower.meta(obj.name, obj.version, lane=obj.lane)
            if "dtype" in meta:
                s[2] = follower.get_array(obj.name, obj.version, lane=obj.lane)
    except nvs.WriterGone as e:
        ending = f"writer gone ({e})"
    except nvs.Timeout as e:
        ending = f"timeout ({e})"
    elapsed = time.monotonic() - start
    if writer is not None:
        writer.wait()

    for name, (versions, nbytes, last) in stats.items():
        line = f"{name:<12} {versions:4d} versions {nbytes:10d} bytes"
        if last is not None:
            line += f"  last: {last.dtype.str} {last.shape}  mean {last.mean():.4f}  min {last.min():.4f}  max {last.max():.4f}"
        print(line)
    total = sum(s[0] for s in stats.values())
    print(f"{total} objects in {elapsed:.2f} s; {ending}")
    return 0 if ending == "end of stream" else 1


if __name__ == "__main__":
    sys.exit(main())
