#!/usr/bin/env python3
"""One decode-graph replay's kernel timeline from an nsys trace (the sqlite export).

    nsys profile --cuda-graph-trace=node -o T flash_layers ... --batches 1 ...
    nsys export --type sqlite -o T.sqlite T.nsys-rep
    python3 bench/flash/nsys_timeline.py T.sqlite [--replay -2] [--gap-us 30]

Why: ncu times each kernel alone and serialized; a batch-1 decode step is a graph whose
branches run on three streams at once, so what sets the step is the critical path and the
gaps between kernels on it, which only a timeline shows. The trace's kernels are split into
replays at host gaps (> --gap-us of an idle GPU: the harness syncs between replays); the
chosen replay (default: the second-to-last, clear of the run's teardown) is printed kernel by
kernel (start offset, duration, stream, idle time on that stream before it, name), then per
stream its busy time and its idle time between its first and last kernel, then the kernels
by total duration.
"""
import argparse
import sqlite3
import sys
from collections import defaultdict


def load(path):
    db = sqlite3.connect(path)
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    cols = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    name_col = "shortName" if "shortName" in cols else "demangledName"
    rows = db.execute(f"SELECT start, end, streamId, {name_col} FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchall()
    return [(s, e, st, names.get(n, str(n))) for s, e, st, n in rows]


def replays(kernels, gap_ns):
    groups, cur, last_end = [], [], None
    for k in kernels:
        if cur and k[0] - last_end > gap_ns:
            groups.append(cur)
            cur = []
        cur.append(k)
        last_end = k[1] if len(cur) == 1 else max(last_end, k[1])
    if cur:
        groups.append(cur)
    return groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sqlite")
    ap.add_argument("--replay", type=int, default=-2, help="index into the replays of the most common size")
    ap.add_argument("--gap-us", type=float, default=30.0)
    ap.add_argument("--min-kernels", type=int, default=50, help="ignore groups with fewer kernels")
    args = ap.parse_args()
    ks = load(args.sqlite)
    if not ks:
        sys.exit("no kernels in the trace")
    groups = [g for g in replays(ks, args.gap_us * 1000) if len(g) >= args.min_kernels]
    if not groups:
        sys.exit("no group of >= %d kernels" % args.min_kernels)
    sizes = defaultdict(int)
    for g in groups:
        sizes[len(g)] += 1
    common = max(sizes, key=lambda s: (sizes[s], s))
    same = [g for g in groups if len(g) == common]
    g = same[args.replay if -len(same) <= args.replay < len(same) else -1]
    t0 = g[0][0]
    wall = max(k[1] for k in g) - t0
    print(f"groups of >= {args.min_kernels} kernels: {len(groups)}; sizes {dict(sizes)}; chosen: {len(g)} kernels, "
          f"wall {wall / 1000:.1f} us")
    print(f"{'start_us':>9} {'dur_us':>7} {'stream':>6} {'idle_us':>7}  name")
    last_end = {}
    busy, first, end = defaultdict(int), {}, {}
    by_name = defaultdict(lambda: [0, 0])
    for s, e, st, n in g:
        idle = (s - last_end[st]) / 1000 if st in last_end else 0.0
        print(f"{(s - t0) / 1000:9.2f} {(e - s) / 1000:7.2f} {st:6d} {idle:7.2f}  {n[:90]}")
        last_end[st] = max(e, last_end.get(st, e))
        busy[st] += e - s
        first.setdefault(st, s)
        end[st] = max(end.get(st, e), e)
        by_name[n][0] += e - s
        by_name[n][1] += 1
    print("\nper stream: kernels busy us / span us (first start .. last end) / idle us inside the span")
    for st in sorted(busy):
        span = end[st] - first[st]
        print(f"  stream {st}: {busy[st] / 1000:.1f} / {span / 1000:.1f} / {(span - busy[st]) / 1000:.1f}")
    print("\nkernels by total duration in the replay (us, calls):")
    for n, (d, c) in sorted(by_name.items(), key=lambda x: -x[1][0])[:30]:
        print(f"  {d / 1000:8.1f} {c:4d}  {n[:100]}")


if __name__ == "__main__":
    main()
