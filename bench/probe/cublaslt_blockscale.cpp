// Probe: which FP8 block-scaling modes does the installed cuBLASLt offer on this GPU?
// V4.1's dense FP8 linears are e4m3 with 32 x 32 ue8m0 weight blocks and (fp8 mode) per-32
// ue8m0 activation blocks: per row and per 32-K block on both operands, which is exactly
// cuBLASLt's VEC32_UE8M0 (MXFP8) mode once each weight block's scale is repeated over its
// 32 rows. If the library ran that on Hopper, fp8 mode would not need a custom GEMM. This
// asks the heuristic for each mode (and times the first algorithm it returns, at one
// Flash shape) so bench/results can say what the library offers, instead of assuming it.
//   g++ -O2 -std=c++20 -I/usr/local/cuda/include cublaslt_blockscale.cpp -L/usr/local/cuda/lib64 -lcublasLt \
//       -lcudart_static -ldl -lpthread -lrt -static-libstdc++ -static-libgcc -o probe && ./probe [m n k]
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                        \
  do {                                                                               \
    auto e_ = (x);                                                                   \
    if (e_ != 0) { std::printf("  %s -> error %d\n", #x, int(e_)); return false; }   \
  } while (0)

struct Mode {
  const char* name;
  cublasLtMatmulMatrixScale_t a, b;
  size_t a_scales, b_scales;  // bytes
};

// D[n_tok x n_out] = A (tokens, K-major) x B^T (weights, K-major), written as cuBLASLt's
// column-major "TN" GEMM: m = weight rows, n = tokens, k.
static bool probe(const Mode& md, int m, int n, int k, void* A, void* B, void* D, void* sa, void* sb, void* ws,
                  size_t ws_bytes) {
  std::printf("%s:\n", md.name);
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &md.a, sizeof(md.a)));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &md.b, sizeof(md.b)));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)));
  cublasLtMatrixLayout_t la, lb, ld;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k));
  CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t res[4];
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 4, res, &found);
  std::printf("  heuristic status %d, algorithms %d\n", int(st), found);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    const float alpha = 1.0f, beta = 0.0f;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cublasStatus_t rs = CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < 3; ++i)
      rs = cublasLtMatmul(h, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &res[0].algo, ws, ws_bytes, 0);
    cudaEventRecord(e0);
    const int iters = 20;
    for (int i = 0; i < iters; ++i)
      rs = cublasLtMatmul(h, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &res[0].algo, ws, ws_bytes, 0);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    ms /= iters;
    std::printf("  matmul status %d (cuda %s), %d x %d x %d: %.4f ms, %.0f TFLOP/s\n", int(rs),
                cudaGetErrorString(cudaGetLastError()), m, n, k, ms, 2.0 * m * n * k / (ms * 1e-3) / 1e12);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(h);
  return true;
}

int main(int argc, char** argv) {
  const int m = argc > 3 ? std::atoi(argv[1]) : 5120, n = argc > 3 ? std::atoi(argv[2]) : 8192,
            k = argc > 3 ? std::atoi(argv[3]) : 8192;  // wo_b at an 8K prefill
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  std::printf("%s sm_%d%d, cuBLASLt %zu, m %d n %d k %d\n", p.name, p.major, p.minor, cublasLtGetVersion(), m, n, k);
  void *A, *B, *D, *sa, *sb, *ws;
  const size_t ws_bytes = 64 << 20;
  cudaMalloc(&A, size_t(m) * k);
  cudaMalloc(&B, size_t(n) * k);
  cudaMalloc(&D, size_t(m) * n * 2);
  // Room for any of the modes' scale tensors (f32 per 32 elements is the largest, with
  // padding for the tiled layouts).
  const size_t sbytes = (size_t(m) + 128) * (k / 16 + 4) * 4, sbbytes = (size_t(n) + 128) * (k / 16 + 4) * 4;
  cudaMalloc(&sa, sbytes);
  cudaMalloc(&sb, sbbytes);
  cudaMalloc(&ws, ws_bytes);
  cudaMemset(A, 0x38, size_t(m) * k);  // e4m3 1.0
  cudaMemset(B, 0x38, size_t(n) * k);
  cudaMemset(sa, 0x7f, sbytes);  // ue8m0 1.0 (bytes); f32 modes read 0x7f7f7f7f (large but finite)
  cudaMemset(sb, 0x7f, sbbytes);
  const Mode modes[] = {
      {"scalar f32 (per tensor)", CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, 4, 4},
      {"outer vector f32 (per row: torch._scaled_mm rowwise)", CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
       CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, 0, 0},
      {"VEC128 f32 x BLK128x128 f32 (DeepSeek-V3 blocks)", CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
       CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, 0, 0},
      {"VEC128 f32 x VEC128 f32", CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, 0, 0},
      {"VEC32 ue8m0 x VEC32 ue8m0 (MXFP8: V4.1's 32-blocks)", CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0,
       CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, 0, 0},
  };
  for (const Mode& md : modes) probe(md, m, n, k, A, B, D, sa, sb, ws, ws_bytes);
  return 0;
}
