// Mask and compile timing for structured outputs on a real vocabulary.
//
//   mask_bench --tokenizer tokenizer.json --cases cases.jsonl [--vocab-size 129280]
//              [--eos 1] [--json-out results.json] [--per-case-out cases_out.jsonl]
//
// cases.jsonl: one {"schema": ..., "instances": [...]} (or "regex"/"ebnf" with
// "instances" as strings) per line. For every case: compile (timed), then for every
// instance teacher-force its text, tokenized greedily by longest vocabulary match, and
// time fill_next_token_bitmask before every token and once more for EOS. The masker is
// shared by a case's instances, as a server shares it between requests. Reports p50,
// p90, p99, p99.9, mean and max of mask time, compile time and time to first mask,
// all as thread CPU time (robust to a loaded machine).
//
// Side-by-side mode (bench/structured/side_by_side.py): a case may instead carry
// "tokens": [[id, ...], ...], instances already tokenized by the real tokenizer. Then a
// step is timed as MaskBench times it, and as the Python driver times xgrammar and
// llguidance: fill the mask, check the token's bit, accept the token; no EOS step.
// Compile time is compile_json_schema plus binding the grammar to the vocabulary.
// --per-case-out writes one line per case: {"id", "compiled", "error", "compile_us",
// "mask_us": [...], "valid_ok", "valid_rejected"}. MASK_BENCH_TRACE=1 prints every
// side-by-side mask over 200 µs with the vocabulary walks it caused (NOTES.md).
//
// The vocabulary is a Hugging Face byte-level BPE tokenizer.json (model.vocab, GPT-2
// byte-to-character map); added and other special tokens get empty bytes.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/check.h"
#include "structured/fsa_builder.h"
#include "structured/matcher.h"
#include "structured/structured.h"

using namespace deepinfer;
using namespace deepinfer::structured;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// CPU time of this thread: on a shared, loaded machine wall time overstates the cost.
double thread_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

// GPT-2's byte <-> printable character map, inverted: code point -> byte.
std::map<uint32_t, uint8_t> byte_decoder() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<int> cs = bs;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
      bs.push_back(b);
      cs.push_back(256 + n++);
    }
  }
  std::map<uint32_t, uint8_t> m;
  for (size_t i = 0; i < bs.size(); ++i) m[uint32_t(cs[i])] = uint8_t(bs[i]);
  return m;
}

TokenVocab load_vocab(const std::string& path, size_t vocab_size, int64_t eos) {
  std::ifstream in(path);
  DI_CHECK_INPUT(in.good(), "cannot open ", path);
  const nlohmann::json t = nlohmann::json::parse(in);  // unordered: 128k keys
  const auto dec = byte_decoder();
  TokenVocab v;
  v.token_bytes.resize(vocab_size);
  v.eos_id = eos;
  for (auto it = t["model"]["vocab"].begin(); it != t["model"]["vocab"].end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || size_t(id) >= vocab_size) continue;
    const std::string& s = it.key();
    std::string bytes;
    bool byte_level = true;
    for (size_t pos = 0; pos < s.size() && byte_level;) {
      uint32_t cp;
      DI_CHECK_INPUT(decode_utf8(s, &pos, &cp), "bad UTF-8 in vocab");
      auto d = dec.find(cp);
      byte_level = d != dec.end();
      if (byte_level) bytes += char(d->second);
    }
    // Special tokens listed in the vocab (not byte-level text) stay empty.
    if (byte_level) v.token_bytes[size_t(id)] = bytes;
  }
  return v;
}

// Longest-match tokenization (not BPE, but a realistic mix of token lengths).
std::vector<int64_t> tokenize(const TokenVocab& v, const std::string& text) {
  static std::map<std::string, int64_t> by_bytes;
  static size_t max_len = 0;
  if (by_bytes.empty()) {
    for (size_t i = 0; i < v.token_bytes.size(); ++i) {
      if (v.token_bytes[i].empty() || int64_t(i) == v.eos_id) continue;
      by_bytes.emplace(v.token_bytes[i], int64_t(i));
      max_len = std::max(max_len, v.token_bytes[i].size());
    }
  }
  std::vector<int64_t> ids;
  for (size_t pos = 0; pos < text.size();) {
    size_t len = std::min(max_len, text.size() - pos);
    for (; len > 0; --len) {
      auto it = by_bytes.find(text.substr(pos, len));
      if (it != by_bytes.end()) {
        ids.push_back(it->second);
        break;
      }
    }
    DI_CHECK_INPUT(len > 0, "text not coverable by the vocabulary");
    pos += len;
  }
  return ids;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p / 100.0 * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer, cases_path, json_out, per_case_out;
  size_t vocab_size = 129280;
  int64_t eos = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--tokenizer") tokenizer = argv[i + 1];
    else if (f == "--cases") cases_path = argv[i + 1];
    else if (f == "--vocab-size") vocab_size = std::stoul(argv[i + 1]);
    else if (f == "--eos") eos = std::stoll(argv[i + 1]);
    else if (f == "--json-out") json_out = argv[i + 1];
    else if (f == "--per-case-out") per_case_out = argv[i + 1];
  }
  if (tokenizer.empty() || cases_path.empty()) {
    std::fprintf(stderr, "usage: mask_bench --tokenizer tokenizer.json --cases cases.jsonl [--json-out F]\n");
    return 2;
  }
  const auto t_vocab = Clock::now();
  const TokenVocab vocab = load_vocab(tokenizer, vocab_size, eos);
  auto index = std::make_shared<VocabIndex>(vocab);
  std::printf("vocabulary: %zu ids, %u distinct byte strings, %zu trie nodes, built in %.0f ms\n",
              index->vocab_size(), index->num_ranks(), index->nodes().size(), us_since(t_vocab) / 1000);

  std::vector<double> compile_us, mask_us, ttfm_us;
  std::vector<std::pair<double, std::string>> slowest;  // compile time, case
  int cases = 0, compiled = 0, instances = 0, rejected = 0, errors = 0;
  std::ifstream in(cases_path);
  DI_CHECK_INPUT(in.good(), "cannot open ", cases_path);
  std::ofstream per_case;
  if (!per_case_out.empty()) per_case.open(per_case_out);
  std::string line;
  std::vector<uint32_t> mask(index->mask_words());
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const Json c = Json::parse(line);
    ++cases;
    Json out = {{"id", c.value("id", std::to_string(cases))}, {"compiled", false}, {"error", nullptr}};
    std::shared_ptr<const CompiledGrammar> g;
    std::shared_ptr<TokenMasker> masker;
    const double t0 = thread_us();
    try {
      JsonSchemaOptions options;
      options.assert_format = c.value("assert_format", true);
      if (c.contains("schema")) g = compile_json_schema(c["schema"].dump(), options);
      else if (c.contains("regex")) g = compile_regex(c["regex"].get<std::string>());
      else g = compile_gbnf(c["ebnf"].get<std::string>());
      masker = std::make_shared<TokenMasker>(g, index);
    } catch (const InputError& e) {
      ++errors;
      if (per_case.is_open()) {
        out["error"] = e.what();
        per_case << out.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
        per_case.flush();
      }
      continue;
    }
    const double compile = thread_us() - t0;
    compile_us.push_back(compile);
    slowest.push_back({compile, line.substr(0, 100)});
    ++compiled;
    if (c.contains("tokens")) {
      // Pre-tokenized instances: the side-by-side protocol (see the top of the file).
      std::vector<double> case_mask_us;
      int valid_ok = 0, valid_rejected = 0;
      for (const Json& inst : c["tokens"]) {
        GrammarMatcher m(masker);
        bool ok = true;
        for (const Json& tok : inst) {
          const int64_t id = tok.get<int64_t>();
          const size_t fw = masker->fragment_walks(), pw = masker->parser_walks(), fh = masker->fragment_hits(),
                       dw = masker->derived_walks();
          const double t1 = thread_us();
          m.fill_next_token_bitmask(mask);
          if (getenv("MASK_BENCH_TRACE") && thread_us() - t1 > 200)
            std::fprintf(stderr, "slow %.0f us fragment_walks %zu parser_walks %zu fragment_hits %zu derived %zu case %s\n",
                         thread_us() - t1, masker->fragment_walks() - fw, masker->parser_walks() - pw,
                         masker->fragment_hits() - fh, masker->derived_walks() - dw, out["id"].get<std::string>().c_str());
          ok = id >= 0 && size_t(id) < index->vocab_size() && ((mask[id >> 5] >> (id & 31)) & 1) &&
               m.accept_token(id);
          const double us = thread_us() - t1;
          mask_us.push_back(us);
          case_mask_us.push_back(us);
          if (case_mask_us.size() == 1) ttfm_us.push_back(compile + us);
          if (!ok) break;
        }
        ++instances;
        if (ok) ++valid_ok;
        else ++valid_rejected, ++rejected;
      }
      if (per_case.is_open()) {
        out["compiled"] = true;
        out["compile_us"] = compile;
        out["mask_us"] = case_mask_us;
        out["valid_ok"] = valid_ok;
        out["valid_rejected"] = valid_rejected;
        per_case << out.dump() << "\n";
        per_case.flush();
      }
      continue;
    }
    bool first = true;
    for (const Json& inst : c["instances"]) {
      const std::string text = inst.is_string() && !c.contains("schema") ? inst.get<std::string>() : inst.dump();
      std::vector<int64_t> ids;
      try {
        ids = tokenize(vocab, text);
      } catch (const InputError&) {
        continue;
      }
      ++instances;
      GrammarMatcher m(masker);
      bool ok = true;
      for (size_t k = 0; k <= ids.size() && ok; ++k) {
        const double t1 = thread_us();
        m.fill_next_token_bitmask(mask);
        const double us = thread_us() - t1;
        mask_us.push_back(us);
        if (first) {
          ttfm_us.push_back(compile + us);
          first = false;
        }
        const int64_t id = k < ids.size() ? ids[k] : eos;
        ok = ((mask[id >> 5] >> (id & 31)) & 1) && m.accept_token(id);
      }
      if (!ok) ++rejected;
    }
  }
  std::printf("cases %d, compiled %d, compile errors %d, instances %d, rejected instances %d\n", cases, compiled,
              errors, instances, rejected);
  double mean = 0;
  for (double x : mask_us) mean += x;
  mean /= std::max<size_t>(1, mask_us.size());
  std::printf("mask us:    n=%zu p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f mean=%.1f max=%.1f\n", mask_us.size(),
              pct(mask_us, 50), pct(mask_us, 90), pct(mask_us, 99), pct(mask_us, 99.9), mean,
              mask_us.empty() ? 0 : *std::max_element(mask_us.begin(), mask_us.end()));
  std::printf("compile us: p50=%.1f p90=%.1f p99=%.1f max=%.1f\n", pct(compile_us, 50), pct(compile_us, 90),
              pct(compile_us, 99), compile_us.empty() ? 0 : *std::max_element(compile_us.begin(), compile_us.end()));
  std::printf("TTFM us:    p50=%.1f p90=%.1f p99=%.1f\n", pct(ttfm_us, 50), pct(ttfm_us, 90), pct(ttfm_us, 99));
  std::sort(slowest.rbegin(), slowest.rend());
  for (size_t i = 0; i < std::min<size_t>(3, slowest.size()); ++i)
    std::printf("slow compile %.1f ms: %s\n", slowest[i].first / 1000, slowest[i].second.c_str());
  if (!json_out.empty()) {
    Json r = {{"cases", cases},         {"compiled", compiled},     {"instances", instances},
              {"rejected", rejected},   {"masks", mask_us.size()},  {"mask_p50_us", pct(mask_us, 50)},
              {"mask_p99_us", pct(mask_us, 99)}, {"mask_p999_us", pct(mask_us, 99.9)}, {"mask_mean_us", mean},
              {"compile_p50_us", pct(compile_us, 50)}, {"compile_p99_us", pct(compile_us, 99)},
              {"ttfm_p50_us", pct(ttfm_us, 50)}};
    std::ofstream(json_out) << r.dump(2) << "\n";
  }
  // Side-by-side runs expect some policy rejections; they are counted per case.
  return rejected == 0 || !per_case_out.empty() ? 0 : 1;
}
