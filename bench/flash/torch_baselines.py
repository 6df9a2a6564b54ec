"""Torch baselines at the DeepSeek-V4.1-Flash shapes of bench/flash/flash_layers.cpp
(run on the GPU machine, whose python3 has torch): one line per measurement,
parsed by bench/flash/report.py.

- FP8 dense linear: torch._scaled_mm (cuBLASLt), e4m3 x e4m3 -> bf16 with per-tensor
  scales (cuBLASLt has no 32x32 block scaling; the per-tensor GEMM is the lower bound
  on what the block-scaled one costs). M < 16 is padded to 16 (cuBLASLt needs it).
- MoE: torch._grouped_mm on bf16 weights (the FP4 experts dequantized), the same
  routing counts as the C++ op bench (T tokens x top-6 uniform over 384 experts):
  gate+up as one [E, 5120, 4608] grouped GEMM, down as [E, 2304, 5120].
- top-k: torch.topk(scores [n, K], k), k = 512 and 2048 (--topk-only: these alone).
- copy bandwidth and the bf16 / fp8 GEMM peaks, measured once.
- batch-1 gemv (`--gemv-only`): _scaled_mm and bf16 torch.mm at the dense FP8 decode shapes,
  n = 1 and 4 (flash_layers --ops-gemv's baselines).
- prefill indexer score (`--index-score`): bf16 matmul + relu + weighted head sum per
  1024-row chunk, causal mask after (flash_layers --index-score-prefill's baseline).
- linear modes (`--linear-only` runs just these and the ceilings): bf16 torch.mm on
  dequantized weights and _scaled_mm at flash_layers --ops-linear's shapes and n.
Timing: CUDA events, median over repeats after warm-up; weights rotated over copies
larger than L2 where they are smaller than it.
"""
import sys
import torch

torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"


def bench(fn, reps=7, warm=3, inner=10):
    """Median over reps of one CUDA-graph replay of `inner` calls, per call: the graph
    removes Python's launch latency (tens of us), which would otherwise dominate the
    small decode shapes. Falls back to eager back-to-back calls if capture fails."""
    for i in range(warm):
        fn(i)
    torch.cuda.synchronize()
    run = None
    try:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                for j in range(inner):
                    fn(j)
        torch.cuda.current_stream().wait_stream(s)
        run = g.replay
    except Exception as e:
        print(f"# graph capture failed ({type(e).__name__}); eager timing", file=sys.stderr)

        def run():
            for j in range(inner):
                fn(j)
    run()
    ts = []
    for i in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / inner)
    ts.sort()
    return ts[len(ts) // 2]


def splitmix_picks(T, E, k, seed):
    # Uniform distinct picks (same distribution as the C++ bench, not the same draws).
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros(E, dtype=torch.int64)
    for _ in range(T):
        counts[torch.randperm(E, generator=g)[:k]] += 1
    return counts


LINEAR_SHAPES = [("wq_a", 1280, 5120, "fp8"), ("wq_b", 32768, 1280, "fp8"), ("wo_b", 5120, 8192, "fp8"),
                 ("shared_w1", 2304, 5120, "fp8"), ("head", 129280, 5120, "bf16")]
LINEAR_NS = [1, 8, 64, 256, 1024, 4096, 8192]
if "--linear-ns" in sys.argv:  # as flash_layers --linear-ns: a comma list of token counts
    LINEAR_NS = [int(v) for v in sys.argv[sys.argv.index("--linear-ns") + 1].split(",")]


def linear_modes():
    """The baselines of flash_layers' linear modes (--ops-linear), same shapes and n:
    bf16 torch.mm on the weight already dequantized to bf16 (bf16 x, bf16 out: what the
    reference's bf16 run does), and torch._scaled_mm (fp8 x fp8, per-tensor scales,
    bf16 out) for the FP8 weights. Lines "torch linear_mm|linear_scaled_mm ..."."""
    one = torch.ones((), device=dev)
    for name, rows, cols, fmt in LINEAR_SHAPES:
        copies = max(2, int(256e6 // (rows * cols * 2)) + 1)
        ws = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        w8 = [w.to(torch.float8_e4m3fn) for w in ws] if fmt == "fp8" else None
        for n in LINEAR_NS:
            flop = 2 * n * rows * cols
            inner = 20 if flop < 2e11 else 3
            x = torch.randn(n, cols, device=dev, dtype=torch.bfloat16)
            ms = bench(lambda i: torch.mm(x, ws[i % copies].t()), inner=inner)
            print(f"torch linear_mm name={name} n={n} rows={rows} cols={cols} ms={ms:.5f} "
                  f"tflops={flop / ms / 1e9:.2f}")
            if w8 is not None:
                m = max(n, 16)
                x8 = torch.randn(m, cols, device=dev).to(torch.float8_e4m3fn)
                ms = bench(lambda i: torch._scaled_mm(x8, w8[i % copies].t(), one, one, out_dtype=torch.bfloat16),
                           inner=inner)
                print(f"torch linear_scaled_mm name={name} n={n} rows={rows} cols={cols} ms={ms:.5f} "
                      f"tflops={flop / ms / 1e9:.2f}")
            sys.stdout.flush()
        del ws, w8
        torch.cuda.empty_cache()


def ceilings():
    buf = torch.empty(2 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(buf)
    ms = bench(lambda i: dst.copy_(buf), inner=3)
    print(f"torch copy_GBps={2 * buf.numel() / ms / 1e6:.1f}")
    del buf, dst
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    ms = bench(lambda i: a @ b, inner=3)
    print(f"torch bf16_gemm_TFLOPs={2 * 8192**3 / ms / 1e9:.1f}")
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.ones((), device=dev)
    ms = bench(lambda i: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16), inner=3)
    print(f"torch fp8_gemm_TFLOPs={2 * 8192**3 / ms / 1e9:.1f}")
    sys.stdout.flush()


def gemv_only():
    """The batch-1 gemv baselines (flash_layers --ops-gemv's dense FP8 shapes, n = 1 and 4):
    torch._scaled_mm (e4m3 x e4m3, per-tensor scales, M padded to 16, bf16 out) and bf16
    torch.mm on bf16 weights (twice the bytes). GBps counts the FP8 weight bytes for both,
    so the bf16 line reads as "FP8-equivalent" speed. Lines "torch gemv ..."."""
    one = torch.ones((), device=dev)
    shapes = [("wq_a", 1280, 5120), ("wkv", 512, 5120), ("wq_b", 32768, 1280), ("wo_a", 8192, 4096),
              ("wo_b", 5120, 8192), ("shared_w1", 2304, 5120), ("shared_w2", 5120, 2304)]
    for name, rows, cols in shapes:
        copies = max(2, int(256e6 // (rows * cols)) + 1)
        w8 = [torch.randn(rows, cols, device=dev).to(torch.float8_e4m3fn) for _ in range(copies)]
        for n in (1, 4):
            x8 = torch.randn(max(n, 16), cols, device=dev).to(torch.float8_e4m3fn)
            ms = bench(lambda i: torch._scaled_mm(x8, w8[i % copies].t(), one, one, out_dtype=torch.bfloat16),
                       inner=20)
            print(f"torch gemv op=scaled_mm name={name} n={n} rows={rows} cols={cols} ms={ms:.5f} "
                  f"GBps={rows * cols / ms / 1e6:.0f}")
        del w8
        copies_b = max(2, int(256e6 // (2 * rows * cols)) + 1)
        wb = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16) for _ in range(copies_b)]
        for n in (1, 4):
            xb = torch.randn(n, cols, device=dev, dtype=torch.bfloat16)
            ms = bench(lambda i: torch.mm(xb, wb[i % copies_b].t()), inner=20)
            print(f"torch gemv op=mm_bf16 name={name} n={n} rows={rows} cols={cols} ms={ms:.5f} "
                  f"GBps={rows * cols / ms / 1e6:.0f}")
        del wb
        torch.cuda.empty_cache()
        sys.stdout.flush()


def index_score():
    """The prefill indexer score (flash_layers --index-score-prefill, NOTES 43) in torch:
    per 1024-row chunk, S = (q [rows * 32, 128] @ k^T [128, keys]) in bf16 (fp32
    accumulation), relu, times w * scale, summed over the 32 heads, causal mask applied
    after (torch does not skip the invisible keys: twice the FLOPs at ratio 1)."""
    H, D, rows = 32, 128, 8192
    for ratio in (2, 1):
        keys = rows // ratio
        q = torch.randn(rows, H, D, device=dev).to(torch.bfloat16)
        k = torch.randn(keys, D, device=dev).to(torch.bfloat16)
        w = torch.randn(rows, H, device=dev) * (D ** -0.5)
        vis = (torch.arange(rows, device=dev) + 1) // ratio
        out = torch.empty(rows, keys, device=dev)
        mask = torch.arange(keys, device=dev)[None, :] >= vis[:, None]

        def run(_):
            for r0 in range(0, rows, 1024):
                s = (q[r0:r0 + 1024].reshape(-1, D) @ k.t()).float().relu_()  # [1024 * 32, keys]
                s = s.view(1024, H, keys)
                out[r0:r0 + 1024] = torch.einsum("thk,th->tk", s, w[r0:r0 + 1024])
            out.masked_fill_(mask, float("-inf"))
        ms = bench(run, reps=3, warm=1, inner=1)
        print(f"torch index_score_prefill rows={rows} ratio={ratio} keys={keys} ms={ms:.4f}", flush=True)


def main():
    if "--index-score" in sys.argv:  # the prefill indexer score (flash_layers --index-score-prefill)
        index_score()
        return
    if "--gemv-only" in sys.argv:  # the batch-1 gemv baselines (flash_layers --ops-gemv)
        gemv_only()
        return
    if "--linear-only" in sys.argv:  # ceilings + linear_modes (flash_layers --ops-linear's baselines)
        ceilings()
        linear_modes()
        return
    batches = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1,8,32,128,256").split(",")]
    ns = batches + [4096]
    moe_only = len(sys.argv) > 2 and sys.argv[2] == "moe"  # just the grouped_mm lines
    if not moe_only:
        ceilings_linears()
    grouped(ns)
    if not moe_only:
        topk()


def ceilings_linears():
    batches = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1,8,32,128,256").split(",")]
    ns = batches + [4096]
    ceilings()
    one = torch.ones((), device=dev)

    shapes = [("wq_a", 1280, 5120), ("wq_b", 32768, 1280), ("wkv", 512, 5120), ("wo_b", 5120, 8192),
              ("shared_w1", 2304, 5120), ("shared_w2", 5120, 2304), ("idx_wq_b", 4096, 1280),
              ("engram_wkv", 25600, 6144)]
    for name, rows, cols in shapes:
        copies = max(2, int(256e6 // (rows * cols)) + 1)
        ws = [torch.randn(rows, cols, device=dev).to(torch.float8_e4m3fn) for _ in range(copies)]
        for n in ns:
            m = max(n, 16)
            x = torch.randn(m, cols, device=dev).to(torch.float8_e4m3fn)
            ms = bench(lambda i: torch._scaled_mm(x, ws[i % copies].t(), one, one, out_dtype=torch.bfloat16),
                       inner=20)
            print(f"torch scaled_mm {name} n={n} rows={rows} cols={cols} ms={ms:.5f}")
        del ws
        sys.stdout.flush()

    linear_modes()


def grouped(ns):
    E, I, D, k = 384, 2304, 5120, 6
    # B operands [E, K, N] stored N-major (K contiguous), the layout grouped GEMMs take.
    w13 = torch.randn(E, 2 * I, D, device=dev, dtype=torch.bfloat16).transpose(-2, -1)
    w2 = torch.randn(E, D, I, device=dev, dtype=torch.bfloat16).transpose(-2, -1)
    for T in ns:
        counts = splitmix_picks(T, E, k, 99 + T)
        rows = int(counts.sum())
        offs = torch.cumsum(counts, 0).to(torch.int32).to(dev)
        x = torch.randn(rows, D, device=dev, dtype=torch.bfloat16)
        h = torch.randn(rows, I, device=dev, dtype=torch.bfloat16)

        def run(i):
            torch._grouped_mm(x, w13, offs=offs)
            torch._grouped_mm(h, w2, offs=offs)

        try:
            ms = bench(run, inner=3)
            print(f"torch grouped_mm T={T} active={int((counts > 0).sum())} ms={ms:.5f}")
        except Exception as e:  # report, do not hide
            print(f"torch grouped_mm T={T} error={type(e).__name__}: {str(e)[:120]}")
        sys.stdout.flush()
    del w13, w2



def topk():
    # The indexer's shapes: keys = context / ratio (candidate level: / 8), k = 512 / 2048.
    for K in [4096, 16384, 32768, 65536, 131072, 262144]:
        for n in [1, 8, 32, 256]:
            s = torch.randn(n, K, device=dev)
            for k in [512, 2048]:
                ms = bench(lambda i: torch.topk(s, k, dim=-1))
                print(f"torch topk K={K} n={n} k={k} ms={ms:.5f}")
            del s
            sys.stdout.flush()

if __name__ == "__main__":
    if "--topk-only" in sys.argv:  # the top-k rows alone
        topk()
    else:
        main()
