"""Per-kernel table from an ncu `--csv --page details` dump (gzip or plain): duration, DRAM / L1TEX /
L2 / SM throughput, issue-slot use, IPC, eligible warps, cycles per issued instruction, occupancy and
hit rates; with kernel ids as extra arguments, the rule texts of those kernels (pipe utilisation, stall
reasons).  Used for bench/results/2026-11-30-moe-decode.md:
    python3 bench/flash/ncu_details.py bench/results/2026-11-30-moe-decode-logs/ncu.csv.gz [ID ...]
"""
import collections
import csv
import gzip
import re
import sys

COLS = ["Duration", "DRAM Throughput", "L1/TEX Cache Throughput", "L2 Cache Throughput",
        "Compute (SM) Throughput", "Issue Slots Busy", "Executed Ipc Active", "Eligible Warps Per Scheduler",
        "No Eligible", "Warp Cycles Per Issued Instruction", "Achieved Active Warps Per SM", "L1/TEX Hit Rate",
        "L2 Hit Rate"]


def main():
    path = sys.argv[1]
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    hdr = rows[0]
    kernels = collections.OrderedDict()
    rules = collections.defaultdict(list)
    for r in rows[1:]:
        d = dict(zip(hdr, r))
        e = kernels.setdefault(d["ID"], {"name": d["Kernel Name"], "grid": d["Grid Size"]})
        if d.get("Metric Name"):
            e[d["Metric Name"]] = d["Metric Value"]
        if d.get("Rule Description"):
            rules[d["ID"]].append((d.get("Rule Name", ""), d["Rule Description"]))
    print("id | kernel | grid | " + " | ".join(COLS))
    for key, e in kernels.items():
        m = re.search(r"(\w+)<([^>]*)>", e["name"])
        name = f"{m.group(1)}<{m.group(2).replace(' ', '')}>" if m else e["name"][:40]
        print(f"{key} | {name} | {e['grid']} | " + " | ".join(e.get(c, "-") for c in COLS))
    for key in sys.argv[2:]:
        print(f"--- {key} {kernels[key]['name'][:100]}")
        for name, text in rules[key]:
            print(f" * {name}: {text}")


if __name__ == "__main__":
    main()
