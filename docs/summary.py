#!/usr/bin/env python3
"""The README's summary benchmark table, from the rows of one `nvs bench --json` run.

    python3 docs/summary.py docs/bench.json
"""
import json
import sys

rows = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "docs/bench.json"))
by = {(r["method"], r["size_bytes"], r["threads"]): r for r in rows if r.get("kind") == "throughput"}


def ns(method, size):
    r = by.get((method, size, 1))
    return r["ns_per_op"] if r and r.get("available") and r.get("gbps") else None


def ceiling(size):
    c = [ns(m, size) for m in ("ceiling", "ceiling_avx512")]
    c = [x for x in c if x]
    return min(c) if c else None


def human(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def cell(method, size):
    n = ns(method, size)
    if n is None:
        return "—"
    gbps = by[(method, size, 1)]["gbps"]
    return f"{n / 1000:.2f} µs ({gbps:.1f} GB/s)" if n >= 1000 else f"{n:.0f} ns ({gbps:.1f} GB/s)"


first = rows[0]
print(f"`nvs bench`, {first['date']}, {first['cpu']}, 1 thread, median of {first['trials']} trials, a file in /dev/shm:")
print()
print("| object | ceiling (NT copy, fence, commit line, fence) | one-fence ceiling (NT copy, header, fence) | nvs put (checksums on: one fence) | put / ceiling | PMDK `pmemlog_append` | nvs get (verified) | memcpy out |")
print("|---|---|---|---|---|---|---|---|")
for size in (1 << 10, 32 << 10, 1 << 20, 20 << 20):
    c, p = ceiling(size), ns("nvs_put", size)
    ratio = f"{c / p:.2f}×" if c and p else "—"
    fast = min(("ceiling", "ceiling_avx512"), key=lambda m: ns(m, size) or float("inf"))
    print(f"| {human(size)} | {cell(fast, size)} | {cell('ceiling_one_fence', size)} | {cell('nvs_put', size)} | {ratio} | {cell('pmemlog_append', size)} | {cell('nvs_get', size)} | {cell('memcpy_out_of_mapping', size)} |")
