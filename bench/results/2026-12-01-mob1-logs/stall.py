#!/usr/bin/env python3
# Per kernel of an `ncu -i X --csv --page raw` export: duration, DRAM %, issue-active %,
# warps per scheduler, and the largest warp stall reasons (warps stalled per issued
# instruction), for NOTES 32 (the lean MoE tiles at batch 1 / 8).
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[0]
idx = {h: i for i, h in enumerate(hdr)}
want = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "smsp__issue_active.avg.pct_of_peak_sustained_active", "smsp__warps_active.avg.per_cycle_active",
        "smsp__warps_eligible.avg.per_cycle_active", "launch__grid_size", "launch__registers_per_thread"]
stalls = [h for h in hdr if h.startswith("smsp__average_warps_issue_stalled_") and h.endswith("_per_issue_active.ratio")]
for r in rows[2:]:
    if len(r) < len(hdr) or "Kernel Name" not in idx:
        continue
    name = r[idx["Kernel Name"]][:60]
    vals = " ".join(f"{w.split('.')[0].split('__')[1][:22]}={r[idx[w]]}" for w in want if w in idx)
    st = []
    for h in stalls:
        try:
            st.append((float(r[idx[h]].replace(",", "")), h[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]))
        except ValueError:
            pass
    st.sort(reverse=True)
    print(f"{r[idx['ID']] if 'ID' in idx else ''} {name} {vals}")
    print("   stalls/issue: " + ", ".join(f"{n} {v:.2f}" for v, n in st[:8]))
