#include "model/v41/graph_params.h"

namespace deepinfer::v41 {

void GraphParamBlock::begin_sizing() {
  invalidate();
  host_ = dev_ = nullptr;
  step_off_ = keyed_off_ = 0;
  overflow_ = false;
  keyed_valid_ = false;
}

void GraphParamBlock::end_sizing() {
  DI_CHECK(host_ == nullptr, "end_sizing outside a sizing pass");
  step_bytes_ = step_off_;
  keyed_begin_ = (step_bytes_ + kAlign - 1) / kAlign * kAlign;
  keyed_bytes_ = keyed_off_;
}

void GraphParamBlock::begin_pass(uint8_t* host, uint8_t* dev, const std::vector<int64_t>& key) {
  DI_CHECK(host != nullptr && dev != nullptr, "a writing pass needs the block's host image and device copy");
  host_ = host;
  dev_ = dev;
  step_off_ = keyed_off_ = 0;
  overflow_ = ended_ = false;
  keyed_valid_ = has_key_ && key == key_;
  if (!keyed_valid_) invalidate();
  pass_key_ = key;
}

bool GraphParamBlock::end_pass() {
  DI_CHECK(host_ != nullptr, "end_pass outside a writing pass");
  ended_ = !overflow_ && step_off_ == step_bytes_ && keyed_off_ == keyed_bytes_;
  return ended_;
}

void GraphParamBlock::commit() {
  DI_CHECK(host_ != nullptr && ended_, "commit without a writing pass that kept the layout");
  has_key_ = true;
  key_ = pass_key_;
  keyed_valid_ = true;
}

}  // namespace deepinfer::v41
