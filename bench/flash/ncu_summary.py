"""Per-step kernel-time breakdown from an ncu CSV of flash_layers --profile
(`ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv`):
kernels grouped by name, one table per profiled decode step (a step starts at embed_rows).
   python3 bench/flash/ncu_summary.py ncu.csv[.gz] [top]
"""
import collections
import csv
import gzip
import re
import sys

path = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
lines = (gzip.open(path, "rt") if path.endswith(".gz") else open(path))
rows = [r for r in csv.DictReader(l for l in lines if l.startswith('"'))]
steps, cur = [], None
for r in rows:
    if "embed_rows" in r["Kernel Name"] or cur is None:
        cur = []
        steps.append(cur)
    cur.append((r["Kernel Name"], float(r["Metric Value"].replace(",", "")) / 1e3))
for i, s in enumerate(steps):
    tot = sum(t for _, t in s)
    print(f"\nProfiled step {i}: {len(s)} kernels, {tot / 1e3:.2f} ms of kernel time\n")
    print("| kernel | launches | ms | share |")
    print("|---|---|---|---|")
    agg = collections.defaultdict(lambda: [0, 0.0])
    for name, t in s:
        # Namespaces first: "(anonymous namespace)::" holds a parenthesis, so stripping the
        # argument list before it would cut every deepinfer kernel to "deepinfer::".
        k = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "").replace("void ", "")
        k = re.sub(r"<.*", "", re.sub(r"\(.*", "", k))
        agg[k][0] += 1
        agg[k][1] += t
    for k, (c, t) in sorted(agg.items(), key=lambda x: -x[1][1])[:top]:
        print(f"| {k} | {c} | {t / 1e3:.2f} | {t / tot * 100:.1f}% |")
