# Helper gvtq (NOTES 57): torch._scaled_mm (cuBLASLt, per-tensor FP8, M padded to 16) at the one-token
# gemv shapes. "time": graph timing as bench/flash/torch_baselines.py (its bench(): one CUDA graph of 20
# calls, weight copies rotating over > 256 MB, median of 7 replays). "ncu": 3 warm calls per shape, then
# one inside torch.cuda.profiler.start / stop (ncu --profile-from-start off profiles just those).
import sys
import torch
sys.path.insert(0, "bench/flash")
from torch_baselines import bench  # noqa: E402

one = torch.ones((), device="cuda")
SHAPES = [("wq_b", 32768, 1280), ("wo_a", 8192, 4096), ("wo_b", 5120, 8192), ("shared_w1", 2304, 5120),
          ("shared_w2", 5120, 2304), ("wq_a", 1280, 5120), ("wkv", 512, 5120)]
mode = sys.argv[1] if len(sys.argv) > 1 else "time"
want = sys.argv[2].split(",") if len(sys.argv) > 2 else [s[0] for s in SHAPES]
for name, rows, cols in SHAPES:
    if name not in want:
        continue
    copies = max(2, int(256e6 // (rows * cols)) + 1) if mode == "time" else 4
    w8 = [torch.randn(rows, cols, device="cuda").to(torch.float8_e4m3fn) for _ in range(copies)]
    x8 = torch.randn(16, cols, device="cuda").to(torch.float8_e4m3fn)
    if mode == "time":
        ms = bench(lambda i: torch._scaled_mm(x8, w8[i % copies].t(), one, one, out_dtype=torch.bfloat16), inner=20)
        print(f"torch gemv op=scaled_mm name={name} n=1 rows={rows} cols={cols} ms={ms:.5f} "
              f"GBps={rows * cols / ms / 1e6:.0f}", flush=True)
    else:
        for i in range(3):
            torch._scaled_mm(x8, w8[i].t(), one, one, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        torch._scaled_mm(x8, w8[3].t(), one, one, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(f"profiled {name}", flush=True)
    del w8
    torch.cuda.empty_cache()
