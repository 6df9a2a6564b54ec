"""One torch._scaled_mm call at V4.1-Flash's wq_b shape at one token (M padded to 16, the
per-tensor FP8 product that reaches ~3.1 TB/s there), inside cudaProfilerStart / Stop, for
ncu: which cuBLASLt kernel, its grid / block / shared memory / registers, and its memory
and issue profile, to compare with our gemv (NOTES 27-31, 35)."""
import torch

rows, cols = 32768, 1280
w = torch.randn(rows, cols, device="cuda").clamp(-8, 8).to(torch.float8_e4m3fn)
x = torch.randn(16, cols, device="cuda").to(torch.float8_e4m3fn)
one = torch.ones((), device="cuda")
for _ in range(5):
    y = torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
y = torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("probe ok", tuple(y.shape))
