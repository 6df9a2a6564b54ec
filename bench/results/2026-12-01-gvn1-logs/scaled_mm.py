# torch._scaled_mm (cuBLASLt, per-tensor FP8, M padded to 16) at the one-token gemv shapes,
# timed as bench/flash/torch_baselines.py --gemv-only does (graph replay of 20 calls, weight
# copies rotating over >= 256 MB); n = 1 only, plus the indexer's wq_b. Helper g2dt, NOTES 38.
import sys
sys.path.insert(0, "bench/flash")
import torch
import torch_baselines as tb

one = torch.ones((), device="cuda")
for name, rows, cols in [("wq_a", 1280, 5120), ("wkv", 512, 5120), ("wq_b", 32768, 1280), ("wo_a", 8192, 4096),
                         ("wo_b", 5120, 8192), ("shared_w1", 2304, 5120), ("shared_w2", 5120, 2304),
                         ("idx_wq_b", 4096, 1280)]:
    copies = max(2, int(256e6 // (rows * cols)) + 1)
    w8 = [torch.randn(rows, cols, device="cuda").to(torch.float8_e4m3fn) for _ in range(copies)]
    x8 = torch.randn(16, cols, device="cuda").to(torch.float8_e4m3fn)
    ms = tb.bench(lambda i: torch._scaled_mm(x8, w8[i % copies].t(), one, one, out_dtype=torch.bfloat16), inner=20)
    print(f"torch gemv op=scaled_mm name={name} n=1 rows={rows} cols={cols} ms={ms:.5f} "
          f"GBps={rows * cols / ms / 1e6:.0f}", flush=True)
    del w8
    torch.cuda.empty_cache()
