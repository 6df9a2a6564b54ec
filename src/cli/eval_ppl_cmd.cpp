// `deepinfer eval-ppl --model DIR --text FILE [--context N] [--stride N] [--batch N]`
//
// Perplexity of a UTF-8 text file under the model, on the CPU oracle:
//
//   * ids = the model's tokenizer.json encode of the whole file, exactly as Python's
//     `tokenizers.Tokenizer.encode(text).ids` (no BOS/EOS added; special-token strings
//     in the text are recognised).
//   * Windows (ppl_windows): window k reads ids[k*stride, min(k*stride + context, T))
//     from a FRESH sequence state at position 0 (nothing carried between windows) and
//     is scored on the targets that no earlier window scored, i.e. positions
//     [max(begin + 1, end of the previous window), end). Windows continue until one
//     reaches the end of the text. The default stride = context gives non-overlapping
//     windows whose first token is context only (never a target); a smaller stride gives
//     every scored token at least context - stride tokens of context.
//   * nll = mean over the scored targets of -log softmax(logits)[target] (natural log,
//     computed in double from the fp32 logits); ppl = exp(nll).
//
// Windows are evaluated --batch at a time in one ragged forward_batch (the logits are
// bitwise those of one window alone). Prints one JSON line:
//   {"tokens": <scored targets>, "nll": <mean nll>, "ppl": <exp(nll)>,
//    "nll_sum": ..., "windows": ..., "context": ..., "stride": ..., "text_tokens": ...}
// tools/train_tiny.py (reference_ppl) computes the same quantity with transformers.
#include "cli/eval_ppl_cmd.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "common/check.h"
#include "model/v41/model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {

std::vector<PplWindow> ppl_windows(int64_t num_tokens, int64_t context, int64_t stride) {
  DI_CHECK_INPUT(context >= 2, "--context must be at least 2, got ", context);
  DI_CHECK_INPUT(stride >= 1 && stride <= context, "--stride must be in [1, context=", context, "], got ", stride);
  std::vector<PplWindow> out;
  int64_t scored_to = 1;  // the next target position nobody scored yet (position 0 is never a target)
  for (int64_t begin = 0; begin < num_tokens; begin += stride) {
    const int64_t end = std::min(begin + context, num_tokens);
    const int64_t first = std::max(begin + 1, scored_to);
    if (end - begin >= 2 && first < end) {
      out.push_back({begin, end, first});
      scored_to = end;
    }
    if (end == num_tokens) break;
  }
  return out;
}

namespace {

std::string read_file(const std::string& path) {
  namespace fs = std::filesystem;
  DI_CHECK_INPUT(fs::is_regular_file(path), "--text: '", path, "' is not a readable file");
  std::ifstream in(path, std::ios::binary);
  DI_CHECK_INPUT(in.good(), "--text: cannot read '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// -log softmax(row)[target] in double.
double token_nll(const float* row, int64_t vocab, int64_t target) {
  double mx = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, double(row[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
  return std::log(sum) + mx - double(row[target]);
}

int64_t lcm_of_ratios(const ModelConfig& c) {
  int64_t l = 1;
  for (int64_t layer : c.kv_source_layer_ids) {
    const int64_t r = c.compress_ratios[layer];
    if (r > 0) l = std::lcm(l, r);
  }
  return l;
}

}  // namespace

int cmd_eval_ppl(int argc, char** argv) {
  Args a(argc, argv, 2, {"model", "text", "context", "stride", "batch"});
  const std::string model_dir = a.require("model");
  const std::string text_path = a.require("text");
  const int64_t context = a.get_int("context", 512, 2, int64_t(1) << 24);
  const int64_t stride = a.get_int("stride", context, 1, context);
  const int64_t batch = a.get_int("batch", 4, 1, 4096);

  const std::string text = read_file(text_path);
  DI_CHECK_INPUT(!text.empty(), "--text: '", text_path, "' is empty");
  const std::string tok_path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  DI_CHECK_INPUT(std::filesystem::is_regular_file(tok_path), "model directory '", model_dir,
                 "' has no tokenizer.json");
  auto tokenizer = Tokenizer::load(tok_path);
  const std::vector<int64_t> ids = tokenizer->encode(text);
  DI_CHECK_INPUT(ids.size() >= 2, "--text: '", text_path, "' has fewer than 2 tokens");

  auto model = v41::Model::load(model_dir);
  const ModelConfig& cfg = model->config();
  for (int64_t t : ids)
    DI_CHECK_INPUT(t >= 0 && t < cfg.vocab_size, "token id ", t, " of the tokenizer is outside the model vocabulary [0, ",
                   cfg.vocab_size, ")");
  const std::vector<PplWindow> windows = ppl_windows(int64_t(ids.size()), context, stride);

  // One pool for the batch: every window owns its own blocks (no sharing), reused
  // batch after batch with fresh slots.
  const int64_t unit = lcm_of_ratios(cfg);
  const int64_t block = unit * std::max<int64_t>(1, (64 + unit - 1) / unit);
  const int64_t max_len = std::min<int64_t>(context, int64_t(ids.size()));
  const int64_t blocks_per_window = (max_len + block - 1) / block;
  const int64_t slots = std::min<int64_t>(batch, int64_t(windows.size()));
  v41::HistoryPool pool(cfg, block, blocks_per_window * slots);
  std::vector<std::vector<int64_t>> tables(slots);
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t k = 0; k < blocks_per_window; ++k) tables[s].push_back(s * blocks_per_window + k);

  double nll_sum = 0.0;
  int64_t scored = 0;
  const int64_t vocab = cfg.vocab_size;
  for (size_t w0 = 0; w0 < windows.size(); w0 += size_t(slots)) {
    const size_t w1 = std::min(windows.size(), w0 + size_t(slots));
    std::vector<v41::StateSlot> state(w1 - w0);
    std::vector<v41::BatchItem> items(w1 - w0);
    for (size_t i = 0; i < items.size(); ++i) {
      const PplWindow& w = windows[w0 + i];
      state[i] = v41::StateSlot::create(cfg);
      items[i].seq = {&state[i], &tables[i]};
      items[i].tokens.assign(ids.begin() + w.begin, ids.begin() + w.end);
      items[i].all_logits = true;
    }
    const std::vector<float> logits = model->forward_batch(pool, items);
    size_t row0 = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      const PplWindow& w = windows[w0 + i];
      for (int64_t p = w.first; p < w.end; ++p) {
        // the logits at position p - 1 (window row p - 1 - begin) predict ids[p]
        const float* row = logits.data() + (row0 + size_t(p - 1 - w.begin)) * size_t(vocab);
        nll_sum += token_nll(row, vocab, ids[p]);
        ++scored;
      }
      row0 += items[i].tokens.size();
    }
  }
  DI_CHECK_INPUT(scored > 0, "--text: nothing to score");
  const double nll = nll_sum / double(scored);
  nlohmann::json out = {{"tokens", scored},        {"nll", nll},         {"ppl", std::exp(nll)},
                        {"nll_sum", nll_sum},      {"windows", windows.size()}, {"context", context},
                        {"stride", stride},        {"text_tokens", ids.size()}};
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace deepinfer::cli
