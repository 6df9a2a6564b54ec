#!/usr/bin/env python3
"""A decode-graph replay's kernel timeline and critical path, from flash_layers --trace-csv.

    flash_layers ... --batches 1 --trace-csv b1.csv        (CUPTI, bench/flash/kernel_trace.h)
    python3 bench/flash/timeline.py b1.csv [--mode graph_untimed] [--step -1] [--brief]

Why: ncu times each kernel alone and serialized, and the layer events give per-layer totals;
a batch-1 decode step is one graph whose branches run on three streams at once, so what sets
the step is its critical path and the idle time between the kernels on it, which only a
timeline shows. "Stream" below is a lane (--lanes): the CUDA stream, or where a graph reports
one stream for all its nodes, the hardware channel a kernel ran on.

The CSV holds the kernels / copies / sets of the first (context, batch) pair's graph steps
(modes graph, with the layer event nodes, and graph_untimed, without) and a "mark" row at each
step's begin and end on the same clock. Per step: the wall of its device work (first kernel's
start to last kernel's end) and, for mode graph, the layer events' sum (flash_layers'
device_ms). The chosen replay is printed kernel by kernel (layer, start offset, duration,
stream, idle time on that stream before it, grid x block, registers, name), then per stream
its busy and idle time, the kernels by total time, and the critical path: from the last kernel
on the main stream (the stream with the most kernels) back, at each step to the kernel on any
stream that ended last before it started (the one whose end could have released it), with the
gap before each link; a link whose kernel started before its same-stream predecessor ended
(programmatic dependent launch) is followed to that predecessor instead and its gap is negative.
Sum of kernel time on the path vs the replay's wall, and per layer.

Layers: by kernel names (a graph may run its main path on several internal streams, so lanes
cannot say which kernels are the main path): every --sites-per-layer-th hyper-connection site
kernel (--site; one opens each attention and each MoE half) opens a layer, pulled back over an
Engram layer's expand / gate right before it (--pre); the first --head kernel after the last
site opens the head. A branch's kernels belong to the layer in which they start.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def load(path):
    ks, marks = [], []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["kind"] == "mark":
                marks.append((int(r["start_ns"]), r["name"]))
            else:
                ks.append(dict(kind=r["kind"], s=int(r["start_ns"]), e=int(r["end_ns"]), stream=int(r["stream"]),
                               channel=int(r.get("channel") or 0),
                               node=int(r["graph_node"]), grid=r["grid"], block=r["block"], regs=int(r["regs"]),
                               smem=int(r["smem_static"]) + int(r["smem_dyn"]), bytes=int(r["bytes"]),
                               name=r["name"] if r["kind"] == "kernel" else f"{r['name']} {int(r['bytes'])}B"))
    ks.sort(key=lambda k: k["s"])
    return ks, marks


def steps_of(ks, marks):
    """[(mode, step, info dict, kernels)] from the begin / end marks."""
    out, open_ = [], {}
    for t, name in marks:
        f = name.split()
        kv = dict(x.split("=", 1) for x in f[1:] if "=" in x)
        if f[0] == "begin":
            open_[(kv["mode"], int(kv["step"]))] = t
        elif f[0] == "end":
            key = (kv["mode"], int(kv["step"]))
            t0 = open_.pop(key, None)
            if t0 is None:
                continue
            # device work may end after the host's end mark only if the step returned early; the
            # harness reads the logits before returning, so [begin, end] holds the step's work
            sel = [k for k in ks if t0 <= k["s"] <= t]
            out.append((key[0], key[1], kv, sel))
    return out


def wall(sel, kinds=("kernel",)):
    kk = [k for k in sel if k["kind"] in kinds]
    return (max(k["e"] for k in kk) - min(k["s"] for k in kk)) if kk else 0


def layers_of(kern, site_rx, pre_rx, head_rx, per_layer):
    """A layer index for each kernel (-1: the embedding, before the first layer; the number of
    layers: the head). Every per_layer-th site kernel opens a layer, pulled back over the
    kernels matching pre_rx that end right before it (an Engram layer's expand and gate); the
    first head_rx kernel after the last site opens the head. Names, not lanes: a graph may run
    its main path on several internal streams."""
    sites = [i for i, k in enumerate(kern) if site_rx.search(k["name"])]
    firsts = sites[::per_layer]

    def pull_back(i):
        t = kern[i]["s"]
        while True:
            pre = [k for k in kern if pre_rx.search(k["name"]) and t - 3000 <= k["e"] <= t]
            if not pre:
                return t
            t = min(k["s"] for k in pre)

    bounds = [pull_back(i) for i in firsts]
    if sites:
        head = [i for i, k in enumerate(kern) if k["s"] > kern[sites[-1]]["s"] and head_rx.search(k["name"])]
        if head:
            bounds.append(pull_back(head[0]))
    out = []
    for k in kern:
        i = -1
        while i + 1 < len(bounds) and k["s"] >= bounds[i + 1]:
            i += 1
        out.append(i)
    return out, bounds


def critical_path(kern, tol_ns=500):
    """Back from the replay's last kernel (the head's, on the main path); returns
    [(kernel index, gap_ns before it, how)]. Kernels of consecutive launches may overlap by
    a few tens of ns in the records (the next one's first block starts as the last block of
    the previous one drains), so a kernel that ended up to tol_ns after K started still
    counts as having ended before it (its gap is then negative)."""
    cur = max(range(len(kern)), key=lambda i: kern[i]["e"])
    last_on, prev_same = {}, {}
    for i, k in enumerate(kern):
        prev_same[i] = last_on.get(k["st"])
        last_on[k["st"]] = i
    chain = []
    while True:
        k = kern[cur]
        ps = prev_same[cur]
        if ps is not None and kern[ps]["e"] > k["s"] + tol_ns:
            # started well before its lane predecessor ended: an early (PDL) launch, so the
            # predecessor is what it waits for
            chain.append((cur, k["s"] - kern[ps]["e"], "pdl"))
            cur = ps
            continue
        best = None
        for j, q in enumerate(kern):
            if j != cur and q["s"] < k["s"] and q["e"] <= k["s"] + tol_ns and (best is None or q["e"] > kern[best]["e"]):
                best = j
        if best is None:
            chain.append((cur, 0, "first"))
            break
        how = "same" if kern[best]["st"] == k["st"] else f"from {kern[best]['st']}"
        chain.append((cur, k["s"] - kern[best]["e"], how))
        cur = best
    chain.reverse()
    return chain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--mode", default="graph_untimed", help="graph (with the layer event nodes) or graph_untimed")
    ap.add_argument("--step", type=int, default=-1, help="index into that mode's measured steps (>= 2)")
    ap.add_argument("--main-stream", type=int, default=None, help="the main lane's id (default: the lane with most kernels)")
    ap.add_argument("--lanes", default="auto", choices=["auto", "stream", "channel", "greedy"],
                    help="what tells the branches apart: the CUDA stream, the hardware channel (a graph's kernels "
                         "may all report its launch stream), or a greedy packing of overlapping kernels; auto: "
                         "the first of these with more than one value")
    ap.add_argument("--site", default=r"hc_site|hc_mixes(?!_finish)",
                    help="the kernel that opens each hyper-connection site (not the deferred finish, NOTES 51)")
    ap.add_argument("--pre", default=r"engram_gate|hc_expand", help="kernels right before a layer's first site that belong to it")
    ap.add_argument("--head", default=r"hc_collapse_norm|hc_expand", help="the first kernel of the head, after the last site")
    ap.add_argument("--sites-per-layer", type=int, default=2)
    ap.add_argument("--kinds", default="r0,r0+engram,r2_source,r2_reuse,r1_source,r1_reuse,r1_reindex",
                    help="names of the layers, in order (flash_layers' 7)")
    ap.add_argument("--brief", action="store_true", help="no kernel-by-kernel list")
    ap.add_argument("--tol-us", type=float, default=0.5, help="critical path: a kernel ending this much after the "
                    "next one's start still counts as its predecessor")
    args = ap.parse_args()
    ks, marks = load(args.csv)
    if not ks:
        sys.exit("no records in " + args.csv)
    steps = steps_of(ks, marks)
    print("steps (mode step: kernels, device wall us = first kernel start .. last kernel end; "
          "host wall ms; layer events' sum ms):")
    for mode, s, kv, sel in steps:
        n = sum(k["kind"] == "kernel" for k in sel)
        lay = kv.get("layers_ms", "")
        lsum = sum(float(x) for x in lay.split(";") if x) if lay else None
        print(f"  {mode:14s} {s:2d}: {n:5d} kernels, wall {wall(sel) / 1000:8.1f} us, host {kv.get('wall_ms', '?')} ms"
              + (f", layers {lsum:.4f} ms" if lsum is not None else ""))
    cand = [x for x in steps if x[0] == args.mode and x[1] >= 2]
    if not cand:
        sys.exit(f"no measured step of mode {args.mode}")
    mode, step, kv, sel = cand[args.step]
    kern = [k for k in sel if k["kind"] == "kernel"]
    lanes = args.lanes
    if lanes == "auto":
        lanes = ("stream" if len({k["stream"] for k in kern}) > 1
                 else "channel" if len({k["channel"] for k in kern}) > 1 else "greedy")
    if lanes == "greedy":
        ends = []  # a kernel goes to the first lane free at its start
        for k in kern:
            for i, e in enumerate(ends):
                if e <= k["s"]:
                    k["st"], ends[i] = i, k["e"]
                    break
            else:
                k["st"] = len(ends)
                ends.append(k["e"])
    else:
        for k in kern:
            k["st"] = k[lanes]
    for k in sel:
        k.setdefault("st", k["stream"])
    t0 = kern[0]["s"]
    W = wall(sel)
    cnt = defaultdict(int)
    for k in kern:
        cnt[k["st"]] += 1
    main_st = args.main_stream if args.main_stream is not None else max(cnt, key=cnt.get)
    lay, bounds = layers_of(kern, re.compile(args.site), re.compile(args.pre), re.compile(args.head), args.sites_per_layer)
    kinds = args.kinds.split(",")
    nl = len(bounds) - 1  # the last bound opens the head
    lname = lambda i: "embed" if i < 0 else "head" if i >= nl else kinds[i] if i < len(kinds) else f"L{i}"
    print(f"\nchosen: mode {mode} step {step}: {len(kern)} kernels, wall {W / 1000:.1f} us, main stream {main_st}, "
          f"lanes ({lanes}) {dict(cnt)}, layer starts at (us) " + ",".join(f"{(b - t0) / 1000:.1f}" for b in bounds))
    others = [k for k in sel if k["kind"] != "kernel"]
    if others:
        print("  copies / sets in the step: " + "; ".join(
            f"{k['name']} st{k['st']} at {(k['s'] - t0) / 1000:.1f} dur {(k['e'] - k['s']) / 1000:.1f}" for k in others[:12]))
    if not args.brief:
        print(f"\n{'layer':>14} {'start_us':>9} {'dur_us':>7} {'stream':>6} {'idle_us':>7} {'grid':>10} {'block':>9} {'regs':>4}  name")
        last_end = {}
        for k, li in zip(kern, lay):
            idle = (k["s"] - last_end[k["st"]]) / 1000 if k["st"] in last_end else 0.0
            print(f"{lname(li):>14} {(k['s'] - t0) / 1000:9.2f} {(k['e'] - k['s']) / 1000:7.2f} {k['st']:6d} {idle:7.2f} "
                  f"{k['grid']:>10} {k['block']:>9} {k['regs']:4d}  {k['name'][:100]}")
            last_end[k["st"]] = max(k["e"], last_end.get(k["st"], k["e"]))
    busy, first, end = defaultdict(int), {}, {}
    by_name = defaultdict(lambda: [0, 0])
    for k in kern:
        busy[k["st"]] += k["e"] - k["s"]
        first.setdefault(k["st"], k["s"])
        end[k["st"]] = max(end.get(k["st"], k["e"]), k["e"])
        by_name[k["name"]][0] += k["e"] - k["s"]
        by_name[k["name"]][1] += 1
    print("\nper stream: kernels, busy us / span us (first start .. last end) / idle us inside the span")
    for st in sorted(busy):
        span = end[st] - first[st]
        print(f"  stream {st}{' (main)' if st == main_st else ''}: {cnt[st]}, {busy[st] / 1000:.1f} / {span / 1000:.1f} / "
              f"{(span - busy[st]) / 1000:.1f}")
    # GPU-wide: time with no kernel running at all inside the wall
    iv = sorted((k["s"], k["e"]) for k in kern)
    covered, cs, ce = 0, iv[0][0], iv[0][1]
    for s, e in iv[1:]:
        if s > ce:
            covered += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    covered += ce - cs
    print(f"  no kernel running anywhere: {(W - covered) / 1000:.1f} us of the {W / 1000:.1f} us wall")
    print("\nkernels by total duration in the replay (us, calls):")
    for n, (d, c) in sorted(by_name.items(), key=lambda x: -x[1][0])[:30]:
        print(f"  {d / 1000:8.1f} {c:4d}  {n[:110]}")

    chain = critical_path(kern, int(args.tol_us * 1000))
    on = sum(kern[i]["e"] - kern[i]["s"] for i, _, _ in chain)
    gaps = sum(max(g, 0) for _, g, _ in chain)
    first_k = kern[chain[0][0]]
    last_k = kern[chain[-1][0]]
    print(f"\ncritical path: {len(chain)} kernels, kernel time {on / 1000:.1f} us + gaps {gaps / 1000:.1f} us "
          f"(path {(last_k['e'] - first_k['s']) / 1000:.1f} us; replay wall {W / 1000:.1f} us, "
          f"{(first_k['s'] - t0) / 1000:.1f} before its first kernel)")
    print(f"{'layer':>14} {'start_us':>9} {'gap_us':>7} {'dur_us':>7} {'stream':>6} {'link':>10}  name")
    per_layer = defaultdict(lambda: [0, 0, 0, 0])  # kernels, kernel ns, gap ns, cross-stream links
    for i, g, how in chain:
        k = kern[i]
        print(f"{lname(lay[i]):>14} {(k['s'] - t0) / 1000:9.2f} {g / 1000:7.2f} {(k['e'] - k['s']) / 1000:7.2f} "
              f"{k['st']:6d} {how:>10}  {k['name'][:90]}")
        p = per_layer[lay[i]]
        p[0] += 1
        p[1] += k["e"] - k["s"]
        p[2] += max(g, 0)
        p[3] += how.startswith("from")
    print("\nper layer on the critical path: kernels, kernel us, gap us, links from another stream; "
          "layer span us (its first main-stream kernel .. the next layer's)")
    starts = [t0] + bounds + [max(k["e"] for k in kern)]
    for li in sorted(per_layer):
        n, d, g, x = per_layer[li]
        span = starts[li + 2] - starts[li + 1] if li + 2 < len(starts) else 0
        print(f"  {lname(li):>14}: {n:3d}, {d / 1000:7.1f}, {g / 1000:6.1f}, {x:2d}; span {span / 1000:.1f}")


if __name__ == "__main__":
    main()
