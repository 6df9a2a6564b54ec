// The cost of generation within a budget (GrammarMatcher::restrict_to_budget) on a real
// vocabulary.
//
//   structured_budget_bench --tokenizer tokenizer.json [--vocab-size 129280] [--eos 1]
//                           [--walks 6] [--max-tokens 48,160]
//
// For a few constraints that a weak model can keep extending (any JSON, objects with
// unbounded strings and extra properties, nested arrays, a left-recursive grammar), it
// generates random walks whose policy prefers tokens that open structures or are long (a
// model that never wants to stop), under the budget filter, with each max_tokens. It
// times the plain mask (fill_next_token_bitmask) and the filter separately as thread CPU
// time, counts the steps whose filter had to walk tokens, the one-time table build per
// grammar, and checks that every walk ended with a complete match.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "runtime/constraints.h"
#include "structured/matcher.h"
#include "structured/structured.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer;
using namespace deepinfer::structured;

namespace {

double thread_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p / 100.0 * double(v.size())))];
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    out.push_back(std::stoll(s.substr(i, j - i)));
    i = j + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer;
  int64_t width = 129280, eos = 1, walks = 6;
  std::vector<int64_t> budgets = {48, 160};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--tokenizer") tokenizer = v;
    else if (f == "--vocab-size") width = std::stoll(v);
    else if (f == "--eos") eos = std::stoll(v);
    else if (f == "--walks") walks = std::stoll(v);
    else if (f == "--max-tokens") budgets = parse_list(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  if (tokenizer.empty()) {
    std::fprintf(stderr, "usage: structured_budget_bench --tokenizer tokenizer.json [flags]\n");
    return 2;
  }
  const bool trace = std::getenv("BUDGET_TRACE") != nullptr;
  auto tok = Tokenizer::load(tokenizer);
  auto vocab = std::make_shared<const VocabIndex>(constraints::token_vocab(*tok, width, eos));
  JsonSchemaOptions compact;
  compact.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  compact.number_digits = kGenerationNumberDigits;
  struct Case {
    const char* name;
    std::shared_ptr<const CompiledGrammar> g;
  };
  std::vector<Case> cases = {
      {"any JSON ({})", compile_json_schema("{}", compact)},
      {"object, extra properties", compile_json_schema(R"({"type":"object","properties":{"name":{"type":"string"},
          "tags":{"type":"array","items":{"type":"string"}}},"required":["name"]})", compact)},
      {"recursive $ref tree", compile_json_schema(R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer"},
          "kids":{"type":"array","items":{"$ref":"#/$defs/t"}}},"required":["v","kids"],"additionalProperties":false}},
          "$ref":"#/$defs/t"})", compact)},
      {"GBNF nested arrays", compile_gbnf("root ::= \"[\" (root (\",\" root)*)? \"]\"\n")},
      {"GBNF left recursion", compile_gbnf("root ::= e\ne ::= e \"+\" t | t\nt ::= [0-9]+ | \"(\" e \")\"\n")},
  };
  std::printf("vocabulary: %zu ids, %u distinct byte strings, longest %zu bytes\n", vocab->vocab_size(),
              vocab->num_ranks(), vocab->max_token_bytes());
  std::printf("| constraint | max_tokens | steps | walked | plain mask p50 / p99 µs | filter p50 / p99 / max µs | "
              "tables ms | complete |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Case& c : cases) {
    auto masker = std::make_shared<TokenMasker>(c.g, vocab);
    const double t0 = thread_us();
    masker->budget();
    const double tables_ms = (thread_us() - t0) / 1e3;
    for (int64_t max_tokens : budgets) {
      std::vector<double> plain, filter;
      size_t walked = 0, complete = 0;
      for (int64_t w = 0; w < walks; ++w) {
        GrammarMatcher m(masker);
        std::vector<uint32_t> mask(m.mask_words());
        std::mt19937 rng(uint32_t(w + 1));
        bool done = false;
        std::string text;
        for (int64_t i = 0; i <= max_tokens && !done; ++i) {
          double a = thread_us();
          m.fill_next_token_bitmask(mask);
          double b = thread_us();
          m.restrict_to_budget(mask, max_tokens - i);
          double e = thread_us();
          plain.push_back(b - a);
          filter.push_back(e - b);
          if (trace && e - b > 2000)
            std::fprintf(stderr, "%s: %.0f us with %lld tokens left after ...%s\n", c.name, e - b,
                         (long long)(max_tokens - i), text.substr(text.size() > 60 ? text.size() - 60 : 0).c_str());
          std::vector<int64_t> allowed, opening;
          for (size_t id = 0; id < vocab->vocab_size(); ++id) {
            if (!((mask[id >> 5] >> (id & 31)) & 1u) || int64_t(id) == vocab->eos_id()) continue;
            allowed.push_back(int64_t(id));
            const std::string_view s = vocab->rank_bytes(uint32_t(vocab->token_rank(int64_t(id))));
            if (s.find_first_of("{[\"(") != std::string_view::npos || s.size() >= 6) opening.push_back(int64_t(id));
          }
          if (allowed.empty()) {
            done = true;
            complete += m.can_end();
            break;
          }
          const int64_t pick = !opening.empty() && rng() % 4 != 0 ? opening[rng() % opening.size()]
                                                                   : allowed[rng() % allowed.size()];
          DI_CHECK(m.accept_token(pick), "the filtered mask allowed a token the matcher refuses");
          text += vocab->rank_bytes(uint32_t(vocab->token_rank(pick)));
        }
        walked += m.budget_walks();
      }
      std::printf("| %s | %lld | %zu | %zu | %.0f / %.0f | %.1f / %.0f / %.0f | %.1f | %zu/%lld |\n", c.name,
                  (long long)max_tokens, plain.size(), walked, pct(plain, 50), pct(plain, 99), pct(filter, 50),
                  pct(filter, 99), pct(filter, 100), tables_ms, complete, (long long)walks);
    }
  }
  return 0;
}
