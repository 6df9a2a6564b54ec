#!/usr/bin/env python3
"""Names for run trac's CSVs, whose kernel names came out empty (kernel_trace.h's first shortener
cut at "(anonymous namespace)"'s parenthesis; fixed since). Each record's (registers, static
shared memory, block, grid, dynamic shared memory) is matched to the kernels of the same binary's
sm_90 cubins (registers from EIATTR_REGCOUNT, static shared memory from .nv.shared.<kernel>, which
counts the 1 KB the driver reports apart), and where that leaves several candidates, the
position in the layer decides (read from the timeline: per layer the same order).
    python3 relabel.py IN.csv OUT.csv"""
import csv, sys
L = {
 (16, 0): "copy_rows",
 (20, 0, "256.1.1", "9.1.1"): "swiglu_act (shared expert)",
 (22, 0): "candidate_mask_ragged",
 (24, 0): "indexer_mask",
 (24, 8192): "sel offsets_kernel",
 (28, 0): "sel mark|ids_kernel",
 (30, 0): "block_max (indexer)",
 (32, 0, "256.1.1", "20.1.1"): "hc_expand",
 (32, 0, "256.1.1", "1.1.1"): "embed_rows",
 (32, 128): "norm_rope_quant<true>",
 (32, 8192): "sel rank_kernel",
 (34, 0, "256.1.1", "24.1.1"): "engram_gather",
 (34, 0, "256.1.1", "64.1.1"): "sel gather_kernel",
 (40, 0): "compress_pool",
 (40, 128, "256.1.1", "1.1.1"): "rms_norm(batched|and_nrq) 1blk",
 (40, 128, "256.1.1", "2.1.1"): "rms_norm_and_nrq (q/kv norms)",
 (42, 0): "moe_plan_fast<true> (plan)",
 (42, 8192): "norm_rope_quant_warp",
 (48, 256): "engram_gate",
 (64, 128, "256.1.1", "32320.1.1"): "gemv (lm head 129280)",
 (64, 128, "256.1.1", "320.1.1"): "gemv g320 (shared w2)",
 (64, 32928): "topk_radix",
 (68, 128): "hc_collapse_norm (final)",
 (72, 384): "gemv_bulk<W1|2> g132 (compressor proj)",
 (79, 384): "gemv_bulk<W3> g132 (shared w1+w3)",
 (80, 5120, "256.1.1", "13.144.1"): "moe_tc_lean stage1 13x144",
 (80, 5120, "256.1.1", "13.80.1"): "moe_tc_lean stage2 13x80",
 (82, 39424): "hc_site<false>",
 (82, 48896): "hc_site<true>",
 (103, 0): "moe_combine<4>",
 (135, 26240): "indexer_score_mma",
 (168, 1536): "router_logits_dmma",
 (255, 0): "attention (mqa_wg|small)",
}
def label(r):
    rg, sm, b, g = int(r["regs"]), int(r["smem_static"]), r["block"], r["grid"]
    for k in [(rg, sm, b, g), (rg, sm, b), (rg, sm)]:
        if k in L: return L[k]
    if (rg, sm) == (96, 1200):
        # the one-token tensor-map gemvs, told apart by grid and ring size (same in every layer)
        tag = {("112", "157952"): "wq_a+wkv pair", ("128", "151040"): "wq_b", ("128", "156672"): "wo_a",
               ("80", "164864"): "wo_b", ("132", "160768"): "engram wkv"}.get((g.split('.')[0], r["smem_dyn"]), "")
        return f"gemv_tmap g{g.split('.')[0]} {tag}".rstrip()
    if (rg, sm) == (64, 128): return f"gemv g{g.split('.')[0]}" + (f" dyn{r['smem_dyn']}" if r["smem_dyn"] != "0" else "")
    return f"? r{rg} s{sm} b{b} g{g}"
rows = list(csv.DictReader(open(sys.argv[1])))
w = csv.DictWriter(open(sys.argv[2], "w", newline=""), fieldnames=rows[0].keys())
w.writeheader()
for r in rows:
    if r["kind"] == "kernel" and not r["name"]: r["name"] = label(r)
    w.writerow(r)
