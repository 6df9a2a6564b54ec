"""torch._scaled_mm at the dense FP8 decode shapes of V4.1-Flash, n = 1, 2, 4, 8 (the baselines
of flash_layers --ops-fp8gemv, NOTES 31): e4m3 x e4m3 -> bf16, per-tensor scales ("tensor") and
row-wise scales ("row": fp32 scale per x row and per weight row, cuBLASLt's outer-vector mode),
M padded to 16 (cuBLASLt needs it). Timing as bench/flash/torch_baselines.py: one CUDA-graph
replay of `inner` calls, median over reps, weights rotated over copies larger than L2.
Lines "torch fp8gemv scale=... name=... n=... ms=... GBps=..." (GBps: weight bytes / time)."""
import sys
import torch

dev = "cuda"


def bench(fn, reps=7, warm=3, inner=20):
    for i in range(warm):
        fn(i)
    torch.cuda.synchronize()
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(inner):
                fn(i)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(inner):
                fn(i)
        run = g.replay
    except Exception as e:  # eager fallback
        print(f"torch fp8gemv graph_capture_failed {type(e).__name__}", flush=True)
        def run():
            for i in range(inner):
                fn(i)
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / inner)
    times.sort()
    return times[len(times) // 2]


def main():
    shapes = [("wq_a", 1280, 5120), ("wkv", 512, 5120), ("wq_b", 32768, 1280), ("wo_b", 5120, 8192),
              ("shared_w1", 2304, 5120), ("shared_w2", 5120, 2304)]
    one = torch.ones((), device=dev)
    for name, rows, cols in shapes:
        copies = max(2, int(256e6 // (rows * cols)) + 1)
        w8 = [torch.randn(rows, cols, device=dev).to(torch.float8_e4m3fn) for _ in range(copies)]
        sw = torch.rand(1, rows, device=dev) + 0.5
        for n in (1, 2, 4, 8):
            m = max(n, 16)
            x8 = torch.randn(m, cols, device=dev).to(torch.float8_e4m3fn)
            sx = torch.rand(m, 1, device=dev) + 0.5
            for kind in ("tensor", "row"):
                try:
                    if kind == "tensor":
                        f = lambda i: torch._scaled_mm(x8, w8[i % copies].t(), one, one, out_dtype=torch.bfloat16)
                    else:
                        f = lambda i: torch._scaled_mm(x8, w8[i % copies].t(), sx, sw, out_dtype=torch.bfloat16)
                    ms = bench(f)
                    print(f"torch fp8gemv scale={kind} name={name} n={n} rows={rows} cols={cols} ms={ms:.5f} "
                          f"GBps={rows * cols / ms / 1e6:.0f}", flush=True)
                except Exception as e:
                    print(f"torch fp8gemv scale={kind} name={name} n={n} failed {type(e).__name__}: {str(e)[:120]}",
                          flush=True)
        del w8
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
