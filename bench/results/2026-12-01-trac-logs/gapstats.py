"""Run trac: the gaps before each link of the critical path, per measured step (median, p10 / p90, the sum
of those under and over 1 us).   python3 gapstats.py b1_named.csv"""
import sys, importlib.util, statistics
import os
spec = importlib.util.spec_from_file_location("tl", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../flash/timeline.py")); tl = importlib.util.module_from_spec(spec); spec.loader.exec_module(tl)
ks, marks = tl.load(sys.argv[1]); steps = tl.steps_of(ks, marks)
for mode in ("graph", "graph_untimed"):
    for _, s, kv, sel in [x for x in steps if x[0] == mode and x[1] >= 2]:
        kern = [k for k in sel if k["kind"] == "kernel"]
        for k in kern: k["st"] = k["stream"]
        ch = tl.critical_path(kern)
        g = [gg for _, gg, how in ch[1:]]
        pos = sorted(x / 1000 for x in g)
        print(mode, s, "links", len(g), "median gap %.2f" % statistics.median(pos), "p10 %.2f p90 %.2f" % (pos[len(pos)//10], pos[9*len(pos)//10]),
              "sum<1us %.1f" % sum(x for x in pos if x < 1), "sum>=1us %.1f" % sum(x for x in pos if x >= 1), "n>=1us", sum(1 for x in pos if x >= 1))
