"""Run trac: the critical path of each measured step, per layer, summed by kernel category (mean over the
mode's measured steps).   python3 cats.py b1_named.csv [graph|graph_untimed]"""
import sys, importlib.util, re
from collections import defaultdict
import os
spec = importlib.util.spec_from_file_location("tl", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../flash/timeline.py")); tl = importlib.util.module_from_spec(spec); spec.loader.exec_module(tl)
CATS = [("shared", r"gemv_bulk_kernel<\(WFormat\)3|swiglu|g320"), ("hc", r"hc_site|hc_expand|engram_gate|hc_collapse"), ("attn_proj", r"gemv_tmap|gemv_bulk<W1"),
        ("norm/rope", r"rms_norm|norm_rope"), ("compr/idx", r"gemv_bulk_kernel<\(WFormat\)1|compress_pool|indexer|topk|gemv_kernel<\(WFormat\)1, 1>|gemv_xs_kernel<\(WFormat\)3>|candidate|block_max|copy_rows"),
        ("selection", r"^sel "), ("attention", r"attention"),
        ("router+plan", r"router_logits|moe_plan"), ("moe_tiles", r"moe_tc_lean"), ("combine", r"moe_combine"), ("shared", r"gemv_bulk_kernel<\(WFormat\)3|swiglu|g320")]
def cat(n, grid=""):
    if n.startswith("gemv_xs_kernel") and grid.startswith("320."): return "shared"
    for c, rx in CATS:
        if re.search(rx, n): return c
    return "other"
ks, marks = tl.load(sys.argv[1]); steps = tl.steps_of(ks, marks)
mode = sys.argv[2] if len(sys.argv) > 2 else "graph_untimed"
kinds = "r0,r0+engram,r2_source,r2_reuse,r1_source,r1_reuse,r1_reindex".split(",")
acc = defaultdict(lambda: defaultdict(float)); nst = 0
for _, s, kv, sel in [x for x in steps if x[0] == mode and x[1] >= 2]:
    nst += 1
    kern = [k for k in sel if k["kind"] == "kernel"]
    if mode == "graph_untimed" and "--memsets" in sys.argv: pass
    for k in kern: k["st"] = k["stream"]
    lay, b = tl.layers_of(kern, re.compile("hc_site"), re.compile("engram_gate|hc_expand"), re.compile("hc_collapse_norm|hc_expand"), 2)
    for i, g, how in tl.critical_path(kern):
        L = "embed" if lay[i] < 0 else "head" if lay[i] >= 7 else kinds[lay[i]]
        # in the head, the first hc_expand is the last layer's expand; keep names simple
        n = kern[i]["name"]
        c = cat(n, kern[i]["grid"]) if not (L == "head" and "gemv_kernel" in n) else "lm_head"
        if L == "head" and c == "compr/idx": c = "head_copy"
        acc[L][c] += (kern[i]["e"] - kern[i]["s"]) / 1000
        acc[L]["gap"] += max(g, 0) / 1000
cols = ["hc", "attn_proj", "norm/rope", "compr/idx", "selection", "attention", "router+plan", "moe_tiles", "combine", "shared", "lm_head", "head_copy", "other", "gap"]
print("mean over %d steps, critical path us by category (%s)" % (nst, mode))
print("%-11s" % "layer" + "".join("%13s" % c for c in cols) + "%9s" % "total")
for L in ["embed"] + kinds + ["head"]:
    print("%-11s" % L + "".join("%13.1f" % (acc[L][c] / nst) for c in cols) + "%9.1f" % (sum(acc[L].values()) / nst))
