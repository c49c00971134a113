"""An SVG bar chart of peers.json (GB/s per case and rank count, log scale); no deps.

usage: python3 plot.py peers.json out.svg
"""

import json
import math
import sys

COLORS = {
    "nvs": "#1f77b4",
    "nvs-nosum": "#aec7e8",
    "bp5": "#ff7f0e",
    "hdf5": "#2ca02c",
    "posix": "#d62728",
    "pmemlog": "#9467bd",
    "memcpy": "#7f7f7f",
}


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src) as f:
        doc = json.load(f)
    rows = [r for r in doc["rows"] if "gbps" in r]
    groups = []
    for r in rows:
        g = (r["case"], r["ranks"])
        if g not in groups:
            groups.append(g)
    peers = list(COLORS)
    lo = min(r["gbps"] for r in rows)
    hi = max(r["gbps"] for r in rows)
    lo_e, hi_e = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if hi_e == lo_e:
        hi_e += 1
    w_bar, gap = 11, 18
    left, top, height = 60, 40, 300
    width = left + len(groups) * (len(peers) * w_bar + gap) + 20

    def y(v):
        return top + height * (1 - (math.log10(v) - lo_e) / (hi_e - lo_e))

    s = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 110}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="20" font-size="13">nvs peers: GB/s per step (log scale) · {doc["date"]} · '
        f'{doc["cpu"]}</text>',
    ]
    for e in range(lo_e, hi_e + 1):
        yy = y(10**e)
        s.append(f'<line x1="{left}" x2="{width - 20}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{left - 5}" y="{yy + 4:.1f}" text-anchor="end">{10.0**e:g}</text>')
    for gi, g in enumerate(groups):
        x0 = left + gap / 2 + gi * (len(peers) * w_bar + gap)
        for pi, p in enumerate(peers):
            r = next((r for r in rows if (r["case"], r["ranks"]) == g and r["peer"] == p), None)
            if r is None:
                continue
            yy = y(r["gbps"])
            s.append(
                f'<rect x="{x0 + pi * w_bar:.1f}" y="{yy:.1f}" width="{w_bar - 1}" '
                f'height="{top + height - yy:.1f}" fill="{COLORS[p]}"><title>{p} {g[0]} {g[1]} rank(s): '
                f'{r["gbps"]:.3f} GB/s</title></rect>'
            )
        cx = x0 + len(peers) * w_bar / 2
        s.append(f'<text x="{cx:.1f}" y="{top + height + 15}" text-anchor="middle">{g[0]}</text>')
        s.append(f'<text x="{cx:.1f}" y="{top + height + 29}" text-anchor="middle">{g[1]} rank(s)</text>')
    for pi, p in enumerate(peers):
        lx = left + pi * 90
        s.append(f'<rect x="{lx}" y="{top + height + 50}" width="10" height="10" fill="{COLORS[p]}"/>')
        s.append(f'<text x="{lx + 14}" y="{top + height + 59}">{p}</text>')
    s.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
