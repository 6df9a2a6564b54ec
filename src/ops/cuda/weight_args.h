// WeightRef (engine view of a checkpoint tensor) -> kernels::WeightArgs.
#pragma once

#include "kernels/cuda/smxx_types.h"
#include "ops/cuda/cuda_check.h"
#include "ops/linear.h"

namespace deepinfer::ops::cuda {

inline kernels::WeightArgs to_weight_args(const WeightRef& w) {
  kernels::WeightArgs a;
  switch (w.dtype) {
    case DType::F32: a.format = kernels::WFormat::kF32; break;
    case DType::BF16: a.format = kernels::WFormat::kBF16; break;
    case DType::F16: a.format = kernels::WFormat::kF16; break;
    case DType::F8_E4M3: a.format = kernels::WFormat::kE4M3; break;
    case DType::I8: a.format = kernels::WFormat::kE2M1; break;
    default: CUDA_OP_CHECK(false, "unsupported weight dtype");
  }
  a.data = w.data;
  a.rows = w.rows;
  a.cols = w.cols;
  if (w.scale != nullptr) {
    CUDA_OP_CHECK(w.scale_dtype == DType::F8_E8M0 || w.scale_dtype == DType::F32, "unsupported scale dtype");
    a.scale_format = w.scale_dtype == DType::F32 ? kernels::SFormat::kF32 : kernels::SFormat::kE8M0;
    a.scale = w.scale;
    a.scale_cols = w.scale_cols;
    a.block_rows = w.block_rows;
    a.block_cols = w.block_cols;
  }
  CUDA_OP_CHECK(kernels::weight_args_valid(a), "malformed weight (shape, packing or scale layout)");
  return a;
}

}  // namespace deepinfer::ops::cuda
