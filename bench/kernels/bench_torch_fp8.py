"""torch reference points for bench_linear at the same V4.1-Flash shapes.

torch._scaled_mm (FP8 e4m3 x FP8 e4m3 on the tensor cores, per-tensor scales,
bf16 out) and a plain bf16 matmul, y = x @ W^T with W [rows, cols]. _scaled_mm
needs every dimension divisible by 16, so batch 1 runs as 16 rows (the same
weight bytes, which is what a decode GEMV is bound by). Activations are FP8 here,
not fp32 as in bench_linear: this is the speed the fast path can aim at, not
the same arithmetic.

Timing as bench_linear: enough weight copies to total >= 1 GiB, 20 calls captured
in a CUDA graph, median of 15 replays.
"""
import sys

import torch

PEAK_GBS = 4270.0
SHAPES = [("wq_a", 1280, 5120), ("wq_b", 32768, 1280), ("wo_b", 5120, 8192)]
BATCHES = [1, 64]
CALLS = 20


def bench(fn_list):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fn_list:  # warm-up (kernel selection, workspace)
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for k in range(CALLS):
            fn_list[k % len(fn_list)]()
    times = []
    for r in range(16):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        if r:
            times.append(e0.elapsed_time(e1))
    times.sort()
    return times[len(times) // 2] * 1e3 / CALLS  # us per call


def main():
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"{'matrix':<8} {'op':<12} {'rows':>6} {'cols':>6} {'n':>4} {'us':>9} {'GB/s':>8} {'%4.27TB':>8} {'TFLOP/s':>8}")
    for name, rows, cols in SHAPES:
        copies = max(2, (1 << 30) // (rows * cols))
        w8 = [torch.randn(rows, cols, device=dev).to(torch.float8_e4m3fn) for _ in range(copies)]
        for n in BATCHES:
            m = max(16, n)
            x8 = torch.randn(m, cols, device=dev).to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev)
            fns = [lambda w=w: torch._scaled_mm(x8, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                   for w in w8]
            try:
                us = bench(fns)
                byts = rows * cols + m * cols + 2 * m * rows
                print(f"{name:<8} {'scaled_mm':<12} {rows:>6} {cols:>6} {n:>4} {us:>9.2f} {byts / us / 1e3:>8.0f} "
                      f"{100 * byts / us / 1e3 / PEAK_GBS:>7.1f}% {2 * m * rows * cols / us / 1e6:>8.2f}")
            except Exception as e:  # report and go on: the other rows still count
                print(f"{name:<8} scaled_mm failed: {e}", file=sys.stderr)
        del w8
        wb = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16) for _ in range(max(2, copies // 2))]
        for n in BATCHES:
            xb = torch.randn(n, cols, device=dev, dtype=torch.bfloat16)
            fns = [lambda w=w: xb @ w.t() for w in wb]
            us = bench(fns)
            byts = 2 * rows * cols + 2 * n * cols + 2 * n * rows
            print(f"{name:<8} {'bf16_matmul':<12} {rows:>6} {cols:>6} {n:>4} {us:>9.2f} {byts / us / 1e3:>8.0f} "
                  f"{100 * byts / us / 1e3 / PEAK_GBS:>7.1f}% {2 * n * rows * cols / us / 1e6:>8.2f}")
        del wb
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
