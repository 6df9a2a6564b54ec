// `deepinfer eval-ppl`: perplexity of a text file under a model (see eval_ppl_cmd.cpp
// for the exact window definition; tools/train_tiny.py computes the same thing with
// the transformers reference).
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::cli {

// One evaluation window: the model reads tokens [begin, end) from a fresh state and
// is scored on the targets at positions [first, end) (first > begin).
struct PplWindow {
  int64_t begin = 0, end = 0, first = 0;
};

// Windows of at most `context` tokens starting at 0, stride, 2*stride, ... until one
// reaches the end of the text. Each scores the targets no earlier window scored:
// [max(begin + 1, previous end), end). Windows that would score nothing are skipped.
// Needs context >= 2 and 1 <= stride <= context.
std::vector<PplWindow> ppl_windows(int64_t num_tokens, int64_t context, int64_t stride);

int cmd_eval_ppl(int argc, char** argv);

}  // namespace deepinfer::cli
