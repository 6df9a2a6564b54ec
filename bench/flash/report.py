"""Turns the logs of flash_layers (C++) and torch_baselines.py into the markdown tables
of bench/results/*-h200-flash-layers.md: per layer kind and configuration the bytes and
FLOPs a step needs in the RELEASED formats (FP8 weights with 32x32 ue8m0 scales, FP4
experts with 1x32 scales, packed cache entries: window 528 B, compressed 288 B, indexer
key 68 B; MODEL_V41.md 8.2), the roofline time max(bytes / 4.27 TB/s, FLOPs / 1414
TFLOP/s FP8), and the fraction of it the measured time reaches; then the 40-layer model.
   python3 bench/flash/report.py FLASH_LOGS... [--torch torch.log] > tables.md
(FLASH_LOGS: flash_layers outputs, decode / prefill / op lines, concatenated in order.)
"""
import re
import sys

BW, FP8 = 4.27e12, 1414e12
D, H, HD, QR, E, I, K_TOP = 5120, 64, 512, 1280, 384, 2304, 6
KINDS = ["ratio-0 window", "ratio-0 + Engram", "r2 KV+index source", "r2 reuse", "r1 KV+index+candidate source",
         "r1 reuse", "r1 reindex (candidates)"]
RATIO = [0, 0, 2, 2, 1, 1, 1]
# Layers of the 40-layer model per kind (MODEL_V41.md 1.2); layer 14 = r2 source + Engram,
# counted as a source plus the Engram increment (kind 1 minus kind 0).
COUNT = [1, 1, 3, 15, 1, 15, 4]
ENGRAM_EXTRA = 1

fp8w = lambda r, c: r * c * (1 + 1 / 1024)
fp4w = lambda r, c: r * c / 2 + r * c / 32
ATTN_W = fp8w(QR, D) + fp8w(H * HD, QR) + fp8w(HD, D) + fp8w(8192, 4096) + fp8w(D, 8192)
ATTN_P = QR * D + H * HD * QR + HD * D + 8192 * 4096 + D * 8192
HC_W = 2 * 24 * 4 * D * 4
EXPERT_W = 2 * fp4w(I, D) + fp4w(D, I)
SHARED_W = 2 * fp8w(I, D) + fp8w(D, I)
EXPERT_P = 3 * I * D
ROUTER_W = 384 * D * 2


def experts_touched(n):
    return E * (1 - (1 - K_TOP / E) ** n)


def step_cost(kind, B, ctx, prefill=False):
    """Bytes and FLOPs of one layer for B sequences at context ctx (decode: 1 token each),
    or (prefill) one sequence of ctx tokens from position 0."""
    r = RATIO[kind]
    ntok = ctx if prefill else B
    nseq = 1 if prefill else B
    by = ATTN_W + HC_W + ROUTER_W + SHARED_W + experts_touched(ntok) * EXPERT_W
    fl = ntok * 2 * (ATTN_P + 24 * 4 * D * 2 + 384 * D + (K_TOP + 1) * EXPERT_P)
    src = kind in (2, 4)
    idx = kind in (2, 4, 6)
    if src:
        by += (2 if r == 2 else 1) * HD * D * 2 + 128 * HD * 2
        fl += ntok * 2 * HD * D * (2 if r == 2 else 1)
    if idx:
        by += fp8w(4096, QR) + 32 * D * 2
        fl += ntok * 2 * (4096 * QR + 32 * D)
    if kind == 1:
        by += fp8w(25600, 6144) + ntok * 24 * 264
        fl += ntok * 2 * 25600 * 6144
    # Attention and indexer, per query position p (decode: p = ctx).
    positions = range(ctx) if prefill else [ctx]
    att_keys = idx_keys = 0
    for p in positions:
        w = min(p + 1, 128)
        visible = (p + 1) // r if r else 0
        sel = min(512, visible)
        att_keys += w + sel
        if idx:
            idx_keys += min(visible, 16384) if kind == 6 else visible
    mult = 1 if prefill else B
    fl += mult * (att_keys * 131072 + idx_keys * 2 * 32 * 128)
    if prefill:  # the cache is written once and read from on-chip memory at best
        by += ctx * (128 * 528 / ctx + (288 + 68) / max(r, 1) if r else 0)
    else:
        by += B * (128 * 528 + (512 * 288 if r else 0) + (idx_keys / B) * 68)
    return by, fl


def roof(by, fl):
    return max(by / BW, fl / FP8)


def parse(path):
    out = []
    for line in open(path):
        parts = line.split()
        if not parts:
            continue
        kv = {}
        for p in parts[2:]:
            if "=" in p:
                k, v = p.split("=", 1)
                kv[k] = v
            else:
                kv["name"] = p
        if len(parts) > 1 and "=" in parts[1]:
            k, v = parts[1].split("=", 1)
            kv[k] = v
        out.append((parts[0], parts[1] if len(parts) > 1 else "", kv, line.strip()))
    return out


def engram_table(flash):
    """The Engram placement compare of flash_layers (engram_layer / engram_gather lines)."""
    layer = [kv for tag, _, kv, _ in flash if tag == "engram_layer"]
    gather = {kv["batch"]: kv for tag, _, kv, _ in flash if tag == "engram_gather"}
    if not layer and not gather:
        return
    print("### Engram table: device vs mapped pinned host memory\n")
    print("Per layer: the Engram layer kind alone (ratio 0 + Engram), eager decode step, layer events. "
          "Gather: engram_gather alone, n tokens x 24 rows of 256 FP8 + 8 scales (264 B).\n")
    print("| batch | layer ms, device table | layer ms, host table | host - device ms | "
          "gather ms, device | gather ms, host | host gather GB/s |")
    print("|---|---|---|---|---|---|---|")
    for kv in layer:
        g = gather.get(kv["batch"], {})
        print(f"| {kv['batch']} | {float(kv['device_ms']):.4f} | {float(kv['host_ms']):.4f} | "
              f"{float(kv['host_minus_device_ms']):+.4f} | {g.get('device_ms', '-')} | {g.get('host_ms', '-')} | "
              f"{g.get('host_GBps', '-')} |")
    print()


def graph_tables(graph, untimed, nodes, dec):
    """Decode as the engine runs it (CUDA graph replay) next to the eager numbers, the
    launches (graph nodes) per layer kind, and the 40-layer extrapolation of the replay."""
    if not graph:
        return
    print("### Decode step per layer kind, eager vs CUDA-graph replay (the engine's decode path)\n")
    print("Per layer: device time between the layer events (graph: event-record nodes inside the graph). "
          "Fraction = roofline / measured. Nodes: graph nodes of the layer (kernels, copies, memsets; "
          "event records not counted), kernels in brackets.\n")
    for ctx in sorted({c for c, _ in graph}):
        bs = sorted(b for c, b in graph if c == ctx)
        print(f"Context {ctx}:\n")
        print("| layer kind | " + " | ".join(f"batch {b}: eager ms / graph ms / roofline ms / graph fraction"
                                           for b in bs) + " | nodes (kernels), " + " / ".join(f"b{b}" for b in bs) + " |")
        print("|---|" + "---|" * len(bs) + "---|")
        for k in range(7):
            cells = []
            for b in bs:
                by, fl = step_cost(k, b, ctx)
                r = roof(by, fl)
                g = graph[(ctx, b)][2][k] * 1e-3
                e = dec.get((ctx, b), (0, [float("nan")] * 7))[1][k]
                cells.append(f"{e:.3f} / {g*1e3:.3f} / {r*1e3:.3f} / {r/g*100:.1f}%")
            ncell = " / ".join(f"{nodes[(ctx, b)][0][k]} ({nodes[(ctx, b)][1][k]})" if (ctx, b) in nodes else "-"
                               for b in bs)
            print(f"| {KINDS[k]} | " + " | ".join(cells) + f" | {ncell} |")
        print()
        print("| batch | eager wall ms | graph wall ms (events) | graph wall ms (no events) | graph device ms "
              "(7 layers) | embed + head nodes |")
        print("|---|---|---|---|---|---|")
        for b in bs:
            w, dv, _ = graph[(ctx, b)]
            nd = nodes.get((ctx, b))
            print(f"| {b} | {dec.get((ctx, b), (float('nan'),))[0]:.3f} | {w:.3f} | {untimed.get((ctx, b), float('nan')):.3f} | "
                  f"{dv:.3f} | {(str(nd[2]) + ' + ' + str(nd[3])) if nd else '-'} |")
        print()
    print("40 layers from the graph replay (step = Σ kind time × layers of that kind + (graph wall − Σ its layers)):\n")
    print("| context | batch | step ms | tokens/s | roofline step ms | fraction |")
    print("|---|---|---|---|---|---|")
    for (ctx, b), (wall, _, lm) in sorted(graph.items()):
        step = sum(c * t for c, t in zip(COUNT, lm)) + ENGRAM_EXTRA * (lm[1] - lm[0]) + (wall - sum(lm))
        rsteps = sum(COUNT[k] * roof(*step_cost(k, b, ctx)) for k in range(7))
        rsteps += ENGRAM_EXTRA * (roof(*step_cost(1, b, ctx)) - roof(*step_cost(0, b, ctx)))
        rsteps += 129280 * D * 2 / BW
        print(f"| {ctx} | {b} | {step:.2f} | {b/step*1e3:.1f} | {rsteps*1e3:.2f} | {rsteps*1e3/step*100:.1f}% |")
    print()


def main():
    args = sys.argv[1:]
    torch_log = []
    if "--torch" in args:
        i = args.index("--torch")
        torch_log = parse(args[i + 1])
        del args[i:i + 2]
    flash = [x for a in args for x in parse(a)]
    # Lines carry act=f32|bf16 (flash_layers --activations; older logs: f32).
    dec_by, pres_by, graph_by, untimed_by, nodes_by = {}, {}, {}, {}, {}
    last_act = "f32"
    for tag, _, kv, _ in flash:
        act = kv.get("act", last_act if tag == "graph_nodes" else "f32")
        last_act = act
        if tag == "decode":
            lm = [float(x) for x in kv["layers_ms"].strip(",").split(",")]
            dec_by.setdefault(act, {})[(int(kv["ctx"]), int(kv["batch"]))] = (float(kv["wall_ms"]), lm)
        elif tag == "decode_graph":
            lm = [float(x) for x in kv["layers_ms"].strip(",").split(",")]
            graph_by.setdefault(act, {})[(int(kv["ctx"]), int(kv["batch"]))] = (
                float(kv["wall_ms"]), float(kv["device_ms"]), lm)
        elif tag == "decode_graph_untimed":
            untimed_by.setdefault(act, {})[(int(kv["ctx"]), int(kv["batch"]))] = float(kv["wall_ms"])
        elif tag == "graph_nodes":
            # graph_nodes lines carry no act=: they follow the decode_graph line of their mode.
            nodes_by.setdefault(act, {})[(int(kv["ctx"]), int(kv["batch"]))] = (
                [int(x) for x in kv["layers_nodes"].strip(",").split(",")],
                [int(x) for x in kv["layers_kernels"].strip(",").split(",")], int(kv["embed"]), int(kv["head"]))
        elif tag == "prefill":
            pres_by.setdefault(act, []).append((int(kv["tokens"]), float(kv["wall_ms"]),
                                                [float(x) for x in kv["layers_ms"].strip(",").split(",")]))

    engram_table(flash)
    for act in sorted(set(dec_by) | set(pres_by)):
        print(f"## Activations {act}\n")
        layers_report(dec_by.get(act, {}), pres_by.get(act, []), graph_by.get(act, {}), untimed_by.get(act, {}),
                      nodes_by.get(act, {}))
    ops_report(flash, torch_log)


def layers_report(dec, pres, graph, untimed, nodes):
    if dec:
        print("### Decode step per layer kind (ms measured / roofline ms / fraction of roofline)\n")
        for ctx in sorted({c for c, _ in dec}):
            bs = sorted(b for c, b in dec if c == ctx)
            print(f"Context {ctx}:\n")
            print("| layer kind | " + " | ".join(f"batch {b}" for b in bs) + " |")
            print("|---|" + "---|" * len(bs))
            for k in range(7):
                cells = []
                for b in bs:
                    by, fl = step_cost(k, b, ctx)
                    m = dec[(ctx, b)][1][k] * 1e-3
                    bound = "B" if by / BW >= fl / FP8 else "C"
                    cells.append(f"{m*1e3:.2f} / {roof(by, fl)*1e3:.3f}{bound} / {roof(by, fl)/m*100:.1f}%")
                print(f"| {KINDS[k]} | " + " | ".join(cells) + " |")
            print("\n(roofline letter: B = bytes-bound, C = FP8-compute-bound)\n")
            print("| batch | bytes per layer step (GB), r1 reuse | FLOPs (GFLOP), r1 reuse |")
            print("|---|---|---|")
            for b in bs:
                by, fl = step_cost(5, b, ctx)
                print(f"| {b} | {by/1e9:.3f} | {fl/1e9:.1f} |")
            print()

        graph_tables(graph, untimed, nodes, dec)
        print("### The 40-layer model, extrapolated (per GPU-equivalent)\n")
        print("Step = Σ kind time × layers of that kind + (7-layer wall − Σ its layers: embed, head, logits copy).\n")
        print("| context | batch | step ms | tokens/s | roofline step ms | roofline tokens/s | fraction | "
              "TFLOP/s achieved (% of FP8 1414) |")
        print("|---|---|---|---|---|---|---|---|")
        for (ctx, b), (wall, lm) in sorted(dec.items()):
            eng = lm[1] - lm[0]
            step = sum(c * t for c, t in zip(COUNT, lm)) + ENGRAM_EXTRA * eng + (wall - sum(lm))
            rsteps = 0.0
            for k in range(7):
                rsteps += COUNT[k] * roof(*step_cost(k, b, ctx))
            by1, fl1 = step_cost(1, b, ctx)
            by0, fl0 = step_cost(0, b, ctx)
            rsteps += ENGRAM_EXTRA * (roof(by1, fl1) - roof(by0, fl0))
            rsteps += 129280 * D * 2 / BW  # head weights (bf16) read once per step
            flops = sum(COUNT[k] * step_cost(k, b, ctx)[1] for k in range(7)) + ENGRAM_EXTRA * (fl1 - fl0)
            flops += b * 2 * 129280 * D
            tf = flops / (step * 1e-3) / 1e12
            print(f"| {ctx} | {b} | {step:.1f} | {b/step*1e3:.1f} | {rsteps*1e3:.2f} | {b/rsteps:.0f} | "
                  f"{rsteps*1e3/step*100:.1f}% | {tf:.2f} ({tf/1414*100:.2f}%) |")
        print()

    for n, wall, lm in pres:
        print(f"### Prefill, one sequence of {n} tokens from position 0\n")
        print("| layer kind | ms | tokens/s | roofline ms | fraction | achieved TFLOP/s |")
        print("|---|---|---|---|---|---|")
        for k in range(7):
            by, fl = step_cost(k, 1, n, prefill=True)
            print(f"| {KINDS[k]} | {lm[k]:.1f} | {n/lm[k]*1e3:.0f} | {roof(by, fl)*1e3:.2f} | "
                  f"{roof(by, fl)*1e3/lm[k]*100:.1f}% | {fl/lm[k]/1e9:.1f} |")
        step = sum(c * t for c, t in zip(COUNT, lm)) + ENGRAM_EXTRA * (lm[1] - lm[0]) + (wall - sum(lm))
        fl40 = sum(c * step_cost(k, 1, n, prefill=True)[1] for k, c in enumerate(COUNT))
        fl40 += ENGRAM_EXTRA * (step_cost(1, 1, n, True)[1] - step_cost(0, 1, n, True)[1])
        tf = fl40 / (step * 1e-3) / 1e12
        print(f"\n40-layer model extrapolated: {step:.0f} ms for {n} tokens = {n/step*1e3:.0f} tokens/s "
              f"(7-layer wall {wall:.0f} ms); {fl40/1e12:.0f} TFLOP -> {tf:.1f} TFLOP/s = {tf/1414*100:.2f}% "
              f"of the FP8 peak.\n")


def linear_modes_table(ours, ref):
    """flash_layers --ops-linear ("op linear act=... path=...") against the torch lines
    "linear_mm" (bf16 torch.mm, dequantized weight) and "linear_scaled_mm"."""
    rows_ = ours.get("linear", [])
    if not rows_:
        return
    tmm = {(r["name"], r["n"]): float(r["ms"]) for r in ref.get("linear_mm", [])}
    tsc = {(r["name"], r["n"]): float(r["ms"]) for r in ref.get("linear_scaled_mm", [])}
    print("\n### Dense linears by activation mode and path (Flash shapes)\n")
    print("TFLOP/s = 2 n rows cols / time; % of the measured peaks (782 bf16, 1414 FP8); ratio = torch ms / ours "
          "(> 1: ours faster). bf16 auto: gemv <= 8, one-MMA tiles, cuBLASLt from the threshold; gemm = forced "
          "cuBLASLt incl. dequant + cast; gemm_bf16w = cuBLASLt alone on a bf16 weight.\n")
    print("| weight | n | f32 auto ms | bf16 auto ms | bf16 mma ms | bf16 gemm ms | gemm_bf16w ms | bf16 auto TFLOP/s "
          "(% 782 / % 1414) | torch.mm bf16 ms | ratio mm/auto | _scaled_mm ms | ratio scaled/auto |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cell = {}
    order = []
    for r in rows_:
        key = (r["name"], int(r["n"]))
        if key not in cell:
            cell[key] = {"rows": int(r["rows"]), "cols": int(r["cols"])}
            order.append(key)
        cell[key][(r["act"], r["path"])] = float(r["ms"])
    for name, n in order:
        c = cell[(name, n)]
        f = lambda k: f"{c[k]:.4f}" if k in c else "-"
        auto = c.get(("bf16", "auto"))
        tf = 2 * n * c["rows"] * c["cols"] / (auto * 1e-3) / 1e12 if auto else float("nan")
        mm, sc = tmm.get((name, str(n))), tsc.get((name, str(n)))
        print(f"| {name} {c['rows']}x{c['cols']} | {n} | {f(('f32', 'auto'))} | {f(('bf16', 'auto'))} | "
              f"{f(('bf16', 'mma'))} | {f(('bf16', 'gemm'))} | {f(('bf16', 'gemm_bf16w'))} | "
              f"{tf:.1f} ({tf / 782 * 100:.1f}% / {tf / 1414 * 100:.1f}%) | {mm if mm else '-'} | "
              f"{(mm / auto) if mm and auto else float('nan'):.2f} | {sc if sc else '-'} | "
              f"{(sc / auto) if sc and auto else float('nan'):.2f} |")
    print()


def ops_report(flash, torch_log):
    ours = {}
    for tag, sub, kv, _ in flash:
        if tag == "op":
            ours.setdefault(sub, []).append(kv)
    ref = {}
    for tag, sub, kv, _ in torch_log:
        if tag == "torch":
            ref.setdefault(sub, []).append(kv)
    for tag, _, kv, line in torch_log:
        if tag == "torch" and ("copy_GBps" in kv or "bf16_gemm_TFLOPs" in kv or "fp8_gemm_TFLOPs" in kv):
            print(f"- ceiling measured in this run: {line[6:]}")
    linear_modes_table(ours, ref)
    if ours.get("fp8_linear"):
        print("\n### Kernel level: ours vs torch at the Flash shapes (ms; ratio = torch / ours, > 1: ours faster)\n")
        print("FP8 linear (ours: 32x32 block scales, fp32 activations; torch._scaled_mm: per-tensor scales, fp8 "
              "activations, bf16 out, M padded to 16):\n")
        print("| weight | n | ours ms | ours GB/s | _scaled_mm ms | ratio |")
        print("|---|---|---|---|---|---|")
        tref = {(r["rows"], r["cols"], r["n"]): float(r["ms"]) for r in ref.get("scaled_mm", [])}
        for r in ours.get("fp8_linear", []):
            rows, cols, n = int(r["rows"]), int(r["cols"]), int(r["n"])
            ms = float(r["ms"])
            gbs = (fp8w(rows, cols) + 4 * n * (rows + cols)) / ms / 1e6
            t = tref.get((r["rows"], r["cols"], r["n"]))
            print(f"| {r.get('name', '')} {rows}x{cols} | {n} | {ms:.4f} | {gbs:.0f} | "
                  f"{t if t is not None else '-'} | {(t / ms) if t else float('nan'):.2f} |")
        print("\nRouted experts, T tokens x top-6 over 384 (ours: FP4 swiglu_expert per active expert; torch: "
              "_grouped_mm on bf16 dequantized weights, gate+up and down):\n")
        print("| T | active experts | ours ms | FP4 bytes floor ms | _grouped_mm ms | ratio |")
        print("|---|---|---|---|---|---|")
        gref = {r["T"]: r.get("ms") for r in ref.get("grouped_mm", [])}
        for r in ours.get("fp4_moe", []):
            a = int(r["active"])
            ms = float(r["ms"])
            t = gref.get(r["T"])
            floor = a * EXPERT_W / BW * 1e3
            print(f"| {r['T']} | {a} | {ms:.3f} | {floor:.3f} | {t or '-'} | "
                  f"{(float(t) / ms) if t else float('nan'):.2f} |")
        if ours.get("moe_grouped"):
            print("\nRouted experts, grouped device-routed op (moe_experts: plan + grouped gemv / tensor-core tiles "
                  "+ combine; same picks as above):\n")
            print("| T | active experts | mode | activations | big tiles | small tiles | ours ms | FP4 bytes floor ms | "
                  "fraction | _grouped_mm ms | ratio |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            for r in ours["moe_grouped"]:
                a = int(r["active"])
                ms = float(r["ms"])
                t = gref.get(r["T"])
                floor = a * EXPERT_W / BW * 1e3
                print(f"| {r['T']} | {a} | {r.get('mode', '')} | {r.get('act', 'f32')} | {r.get('big', '-')} | "
                      f"{r.get('small', '-')} | {ms:.3f} | "
                      f"{floor:.3f} | {floor / ms:.1%} | "
                      f"{t or '-'} | {(float(t) / ms) if t else float('nan'):.2f} |")
        if ours.get("router"):
            print("\nRouter (BF16 gate [384 x 5120], double-sum logits + top-6 select):\n")
            print("| T | ours ms | gate bytes floor ms |")
            print("|---|---|---|")
            for r in ours["router"]:
                floor = int(r["experts"]) * int(r["dim"]) * 2 / BW * 1e3
                print(f"| {r['T']} | {float(r['ms']):.4f} | {floor:.4f} |")
        kref = {(r["K"], r["n"], r.get("k", "512")): float(r["ms"]) for r in ref.get("topk", [])}
        if ours.get("topk"):
            print("\nIndexer top-k (ours: indexer_select incl. visibility mask, minus the score-restoring copy; "
                  "torch.topk):\n")
            print("| keys | n | k | ours ms | torch.topk ms | ratio |")
            print("|---|---|---|---|---|---|")
            for r in ours["topk"]:
                ms = float(r["ms"]) - float(r["copy_ms"])
                t = kref.get((r["K"], r["n"], r.get("k", "512")))
                print(f"| {r['K']} | {r['n']} | {r.get('k', '512')} | {ms:.4f} | {t if t is not None else '-'} | "
                      f"{(t / ms) if t else float('nan'):.2f} |")
        if ours.get("topk_kernel"):
            print("\nTop-k kernel alone (kernels::topk_rows: radix = the default path, blocks per row = its cluster "
                  "size; oneblock = the former kernel) vs torch.topk(s, k); ratio = torch / ours:\n")
            print("| keys | rows | k | blocks/row | radix ms | oneblock ms | torch.topk ms | ratio radix | "
                  "ratio oneblock |")
            print("|---|---|---|---|---|---|---|---|---|")
            for r in ours["topk_kernel"]:
                rad, one = float(r["radix_ms"]), float(r["oneblock_ms"])
                t = kref.get((r["K"], r["n"], r["k"]))
                tr = f"{t / rad:.2f}" if t else "-"
                to = f"{t / one:.2f}" if t else "-"
                print(f"| {r['K']} | {r['n']} | {r['k']} | {r['blocks_per_row']} | {rad:.4f} | {one:.4f} | "
                      f"{t if t is not None else '-'} | {tr} | {to} |")
        if ours.get("topk_cluster"):
            auto = {(r["K"], r["n"]): r["blocks_per_row"] for r in ours.get("topk_kernel", [])}
            print("\nRadix top-k (k = 512) at each forced cluster size, ms (* = the size topk_cluster_size picks):\n")
            print("| keys | rows | 1 block | 2 | 4 | 8 |")
            print("|---|---|---|---|---|---|")
            for r in ours["topk_cluster"]:
                a = auto.get((r["K"], r["n"]))
                cells = [f"{float(r[f'c{c}_ms']):.4f}{'*' if str(c) == a else ''}" for c in (1, 2, 4, 8)]
                print(f"| {r['K']} | {r['n']} | " + " | ".join(cells) + " |")
        if ours.get("index_score"):
            print("\nIndexer score, paged (rows queries x 32 heads x 128, each against its own keys; FP4-grid q and "
                  "keys in fp32; floor = fp32 keys + q + scores once at 4.27 TB/s):\n")
            print("| rows | keys | simt ms | mma ms | simt / mma | fp32 floor ms | mma vs floor |")
            print("|---|---|---|---|---|---|---|")
            for r in ours["index_score"]:
                si, mm, fl = float(r["simt_ms"]), float(r["mma_ms"]), float(r["fp32_floor_ms"])
                print(f"| {r['rows']} | {r['keys']} | {si:.4f} | {mm:.4f} | {si / mm:.2f} | {fl:.4f} | "
                      f"{fl / mm * 100:.0f}% |")
        print("\nSink attention, decode (n queries x 64 heads x 512, 640 fp32 entries each; floor = entries read "
              "once as fp32, and as the packed cache would be):\n")
        print("| n | ours ms | fp32 floor ms | fraction | packed-cache floor ms |")
        print("|---|---|---|---|---|")
        for r in ours.get("attention", []):
            n = int(r["n"])
            ms = float(r["ms"])
            fb = n * (640 * 512 * 4 + 2 * 64 * 512 * 4) / BW * 1e3
            pb = n * (128 * 528 + 512 * 288) / BW * 1e3
            print(f"| {n} | {ms:.4f} | {fb:.4f} | {fb/ms*100:.1f}% | {pb:.4f} |")
        if ours.get("attention_mode"):
            print("\nSink attention by precision (f32: exact SIMT kernel; bf16: tensor cores; "
                  "FLOPs = n x 64 x entries x 512 x 4):\n")
            print("| n | layout | entries | act | kernel | ms | TFLOP/s |")
            print("|---|---|---|---|---|---|---|")
            for r in ours["attention_mode"]:
                print(f"| {r['n']} | {r['layout']} | {r['entries']} | {r['act']} | {r.get('path', '-')} "
                      f"| {float(r['ms']):.4f} | {r['tflops']} |")


if __name__ == "__main__":
    main()
