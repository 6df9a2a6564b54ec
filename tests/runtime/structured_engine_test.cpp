// Structured outputs through the engine (runtime/constraints.h): every sampled token is
// one the grammar's mask allows (checked against an independent matcher, also with
// logit_bias pushing a forbidden token and at temperature > 0), generation ends with
// "stop" when the grammar completes, logprobs are those of the masked distribution,
// preemption does not change constrained outputs, whitespace stays bounded, and bad
// constraints are InputErrors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/check.h"
#include "deepinfer/engine.h"
#include "runtime/constraint_fields.h"
#include "runtime/constraints.h"
#include "structured/structured.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using Kind = StructuredConstraint::Kind;
const std::string kModel = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_quant";

struct Result {
  std::vector<int64_t> ids;
  std::string text, finish_reason;
  std::vector<TokenLogprob> logprobs;
};

std::map<std::string, Result> run_all(Engine& e, const std::vector<GenerateRequest>& reqs) {
  for (const auto& r : reqs) e.add_request(r);
  std::map<std::string, Result> out;
  while (e.has_unfinished())
    for (const auto& o : e.step()) {
      Result& r = out[o.request_id];
      r.ids.insert(r.ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      r.text += o.text_delta;
      r.logprobs.insert(r.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      if (o.finished) r.finish_reason = o.finish_reason;
    }
  return out;
}

StructuredConstraint constraint(Kind kind, std::string spec, int64_t ws = 0) {
  StructuredConstraint c;
  c.kind = kind;
  c.spec = std::move(spec);
  c.max_whitespace = ws;
  return c;
}

GenerateRequest request(const std::string& id, const Engine& e, const StructuredConstraint& c, float temperature,
                        uint64_t seed, int64_t max_tokens = 64) {
  GenerateRequest r;
  r.request_id = id;
  r.prompt_ids = e.tokenize("data = ");
  r.params.temperature = temperature;
  r.params.seed = seed;
  r.params.max_tokens = max_tokens;
  r.params.structured = c;
  return r;
}

// An independent replay of a request's tokens: the mask before each token must allow
// it (the engine's own mask is not consulted).
struct Replay {
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(kModel + "/tokenizer.json");
  std::shared_ptr<structured::VocabIndex> vocab;
  Replay(int64_t width, int64_t eos) {
    vocab = std::make_shared<structured::VocabIndex>(constraints::token_vocab(*tok, width, eos));
  }
  // Returns the number of tokens the mask allowed, stopping at the first one it did not.
  size_t allowed_prefix(const StructuredConstraint& c, const Result& r, std::vector<int64_t>* mask_sizes = nullptr) {
    structured::GrammarMatcher m(std::make_shared<structured::TokenMasker>(constraints::compile(c), vocab));
    std::vector<uint32_t> words(m.mask_words());
    for (size_t i = 0; i < r.ids.size(); ++i) {
      m.fill_next_token_bitmask(words);
      const int64_t t = r.ids[i];
      if (mask_sizes) {
        int64_t n = 0;
        for (uint32_t w : words) n += __builtin_popcount(w);
        mask_sizes->push_back(n);
      }
      if (!((words[t >> 5] >> (t & 31)) & 1u) || !m.accept_token(t)) return i;
    }
    return r.ids.size();
  }
};

TEST(StructuredEngine, ForbiddenTokensAreNeverSampledEvenWhenBiased) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  Replay replay(e->vocab_size(), e->eos_token_id());
  // The letter 'x' is never allowed by these constraints; push it (and EOS) hard.
  const std::vector<int64_t> x = e->tokenize("x");
  ASSERT_EQ(x.size(), 1u);
  const std::vector<StructuredConstraint> cs = {
      constraint(Kind::kRegex, "[0-9]{2,6}(-[a-f]{1,3})?"),
      constraint(Kind::kJsonSchema, R"({"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":500},
        "b":{"enum":["red","green"]}},"required":["a","b"],"additionalProperties":false})"),
      constraint(Kind::kGrammar, "root ::= \"(\" item (\",\" item){0,3} \")\"\nitem ::= [0-9] | \"yes\" | \"no\""),
  };
  std::vector<GenerateRequest> reqs;
  for (size_t ci = 0; ci < cs.size(); ++ci)
    for (int s = 0; s < 6; ++s) {
      GenerateRequest r = request(str_cat("c", ci, "-", s), *e, cs[ci], s % 3 == 0 ? 0.0f : 1.5f, 100 + s);
      r.params.logit_bias = {{x[0], 100.0f}, {e->eos_token_id(), 50.0f}};
      r.params.logprobs = 5;
      reqs.push_back(r);
    }
  auto out = run_all(*e, reqs);
  for (size_t ci = 0; ci < cs.size(); ++ci)
    for (int s = 0; s < 6; ++s) {
      const Result& r = out[str_cat("c", ci, "-", s)];
      SCOPED_TRACE(str_cat("constraint ", ci, " seed ", s, ": ", r.text));
      EXPECT_EQ(replay.allowed_prefix(cs[ci], r), r.ids.size());
      for (int64_t t : r.ids) EXPECT_NE(t, x[0]);
      EXPECT_EQ(r.finish_reason, "stop");
      EXPECT_TRUE(structured::matches(*constraints::compile(cs[ci]), r.text));
      // Logprobs come from the masked distribution: only allowed tokens, and the
      // sampled token's probability is renormalised over them.
      ASSERT_EQ(r.logprobs.size(), r.ids.size());
      for (const TokenLogprob& lp : r.logprobs) {
        EXPECT_TRUE(std::isfinite(lp.logprob));
        for (const auto& [tok, l] : lp.top) EXPECT_NE(tok, x[0]);
      }
    }
}

TEST(StructuredEngine, LogprobsAreTheMaskedDistribution) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  Replay replay(e->vocab_size(), e->eos_token_id());
  StructuredConstraint c;
  c.kind = Kind::kChoice;
  c.choices = {"alpha", "beta", "gamma delta"};
  auto out = run_all(*e, {request("a", *e, c, 1.0f, 3), request("g", *e, c, 0.0f, 3)});
  for (const auto& [id, r0] : out) {
    Result r = r0;
    SCOPED_TRACE(id + ": " + r.text);
    EXPECT_TRUE(r.text == "alpha" || r.text == "beta" || r.text == "gamma delta");
    EXPECT_EQ(r.finish_reason, "stop");
    std::vector<int64_t> sizes;
    ASSERT_EQ(replay.allowed_prefix(c, r, &sizes), r.ids.size());
    EXPECT_EQ(r.ids.back() == e->eos_token_id(), false) << "the grammar completes without sampling EOS";
  }
  // With logprobs covering every allowed token the probabilities sum to 1.
  GenerateRequest q = request("lp", *e, c, 1.0f, 9);
  q.params.logprobs = 20;
  auto lp = run_all(*e, {q})["lp"];
  std::vector<int64_t> sizes;
  ASSERT_EQ(replay.allowed_prefix(c, lp, &sizes), lp.ids.size());
  ASSERT_FALSE(lp.logprobs.empty());
  for (size_t i = 0; i < lp.logprobs.size(); ++i) {
    if (sizes[i] > 20) continue;
    EXPECT_EQ(int64_t(lp.logprobs[i].top.size()), sizes[i]);
    double sum = 0;
    for (const auto& [tok, l] : lp.logprobs[i].top) sum += std::exp(double(l));
    EXPECT_NEAR(sum, 1.0, 1e-4) << "step " << i;
  }
}

TEST(StructuredEngine, PreemptionKeepsTheMatcherState) {
  EngineOptions small, big;
  small.model_dir = big.model_dir = kModel;
  small.block_size = big.block_size = 8;
  small.cache_blocks = 10;  // 80 positions for 6 requests: preemption and recompute
  small.enable_prefix_caching = big.enable_prefix_caching = false;
  auto a = Engine::create(small), b = Engine::create(big);
  const StructuredConstraint c = constraint(Kind::kRegex, "[a-z]{10,30}(, [0-9]{1,3}){1,4}");
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(str_cat("p", i), *a, c, 1.0f, 40 + i, 60));
  auto ra = run_all(*a, reqs), rb = run_all(*b, reqs);
  Replay replay(a->vocab_size(), a->eos_token_id());
  for (int i = 0; i < 6; ++i) {
    const std::string id = str_cat("p", i);
    EXPECT_EQ(ra[id].ids, rb[id].ids) << id;
    EXPECT_EQ(replay.allowed_prefix(c, ra[id]), ra[id].ids.size()) << id;
    EXPECT_TRUE(structured::matches(*constraints::compile(c), ra[id].text)) << ra[id].text;
  }
}

TEST(StructuredEngine, WhitespaceIsCompactOrBounded) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  const std::vector<int64_t> space = e->tokenize(" ");
  ASSERT_EQ(space.size(), 1u);
  const std::string schema =
      R"({"type":"object","properties":{"a":{"type":"integer","minimum":0,"maximum":9},"b":{"type":"boolean"}},
          "required":["a","b"],"additionalProperties":false})";
  for (int64_t ws : {0, 3}) {
    SCOPED_TRACE(ws);
    GenerateRequest r = request("w", *e, constraint(Kind::kJsonSchema, schema, ws), 0.0f, 1, 200);
    r.params.logit_bias = {{space[0], 100.0f}};  // the model would write only spaces if it could
    const Result res = run_all(*e, {r})["w"];
    EXPECT_EQ(res.finish_reason, "stop") << res.text;
    const auto j = nlohmann::json::parse(res.text);
    // 0.0 is an integer for JSON Schema (json_schema.h, Numbers).
    EXPECT_TRUE(j["a"].is_number() && j["a"].get<double>() == std::floor(j["a"].get<double>()) && j["b"].is_boolean())
        << res.text;
    size_t run = 0, longest = 0, total = 0;
    for (char ch : res.text) {
      run = ch == ' ' ? run + 1 : 0;
      total += ch == ' ';
      longest = std::max(longest, run);
    }
    EXPECT_EQ(longest, size_t(ws)) << res.text;  // pushed to the bound, never past it
    if (ws == 0) {
      EXPECT_EQ(total, 0u) << res.text;
    }
  }
}

// Numbers are generated within structured::kGenerationNumberDigits: a model pushed to
// write digits and never to end still ends, at the bound.
TEST(StructuredEngine, NumbersAreBoundedInDigits) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  const std::vector<int64_t> nine = e->tokenize("9"), nl = e->tokenize("\n");
  ASSERT_EQ(nine.size(), 1u);
  ASSERT_EQ(nl.size(), 1u);
  for (const char* schema : {R"({"type":"integer"})", R"({"type":"number","minimum":0})",
                             R"({"type":"array","items":{"type":"integer"},"maxItems":1})"}) {
    SCOPED_TRACE(schema);
    const StructuredConstraint c = constraint(Kind::kJsonSchema, schema);
    GenerateRequest r = request("n", *e, c, 0.0f, 1, 200);
    r.params.logit_bias = {{nine[0], 100.0f}, {e->eos_token_id(), -100.0f}, {nl[0], -100.0f}};
    const Result res = run_all(*e, {r})["n"];
    EXPECT_EQ(res.finish_reason, "stop") << res.text;
    EXPECT_TRUE(structured::matches(*constraints::compile(c), res.text.substr(0, res.text.find('\n')))) << res.text;
    const size_t first = res.text.find('9');
    ASSERT_NE(first, std::string::npos) << res.text;
    // Pushed to the 19-digit bound, never past it, and no point after 19 digits (15 is
    // the most with one), so the number ends there.
    const size_t end = std::min(res.text.find_first_not_of('9', first), res.text.size());
    EXPECT_EQ(end - first, 19u) << res.text;
    EXPECT_LE(res.text.size() - first, 20u) << res.text;  // 19 digits and ']' or a newline
  }
}

// JSON may end with one newline (trailing whitespace) once the value is complete; exact
// kinds (regex) never allow a newline they do not spell.
TEST(StructuredEngine, NewlineEndsCompleteJsonOnly) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  const std::vector<int64_t> nl = e->tokenize("\n");
  ASSERT_EQ(nl.size(), 1u);
  GenerateRequest js = request("json", *e, constraint(Kind::kJsonSchema, R"({"type":"integer"})"), 0.0f, 1, 30);
  js.params.logit_bias = {{nl[0], 100.0f}};
  GenerateRequest re = request("regex", *e, constraint(Kind::kRegex, "[0-9]+"), 0.0f, 1, 6);
  re.params.logit_bias = {{nl[0], 100.0f}};
  auto out = run_all(*e, {js, re});
  EXPECT_EQ(out["json"].finish_reason, "stop");
  ASSERT_GE(out["json"].text.size(), 2u);
  EXPECT_EQ(out["json"].text.back(), '\n');  // pushed to the newline as soon as it was allowed
  EXPECT_EQ(out["json"].ids.size(), 2u) << out["json"].text;
  EXPECT_NO_THROW(nlohmann::json::parse(out["json"].text));
  EXPECT_EQ(out["regex"].text.find('\n'), std::string::npos) << out["regex"].text;
  EXPECT_TRUE(structured::matches(*constraints::compile(re.params.structured.value()), out["regex"].text));
}

TEST(StructuredEngine, UnconstrainedNeighboursAreUnchanged) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  GenerateRequest plain;
  plain.request_id = "plain";
  plain.prompt_ids = e->tokenize("data = ");
  plain.params.temperature = 0.7f;
  plain.params.seed = 5;
  plain.params.max_tokens = 12;
  plain.params.ignore_eos = true;
  auto alone = run_all(*e, {plain})["plain"];
  auto mixed = run_all(*e, {plain, request("c", *e, constraint(Kind::kRegex, "[0-9]+"), 1.0f, 2, 12)});
  EXPECT_EQ(mixed["plain"].ids, alone.ids);
}

TEST(StructuredEngine, BadConstraintsAreInputErrors) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  auto expect_error = [&](const StructuredConstraint& c, const std::string& needle) {
    GenerateRequest r = request("bad", *e, c, 0.0f, 1);
    try {
      e->add_request(r);
      ADD_FAILURE() << "accepted: " << c.spec;
      e->abort_request("bad");
      while (e->has_unfinished()) e->step();
    } catch (const InputError& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
    EXPECT_THROW(e->check_constraint(c), InputError);
    EXPECT_FALSE(e->has_unfinished());
  };
  expect_error(constraint(Kind::kJsonSchema, "{\"type\": "), "not valid JSON");
  expect_error(constraint(Kind::kJsonSchema, R"({"type":"object","if":{"required":["a"]},"then":{"required":["b"]}})"),
               "'if'");
  expect_error(constraint(Kind::kRegex, "(a|b"), "regex");
  expect_error(constraint(Kind::kRegex, "(a)\\1"), "backreference");
  expect_error(constraint(Kind::kGrammar, "root ::= foo"), "grammar");
  expect_error(constraint(Kind::kJsonSchema, "{}", 1000), "max_whitespace");
  StructuredConstraint empty;
  empty.kind = Kind::kChoice;
  expect_error(empty, "empty");
  expect_error(constraint(Kind::kJsonSchema, "false"), "no output can satisfy it");
  // A good request right after bad ones still runs.
  auto ok = run_all(*e, {request("ok", *e, constraint(Kind::kRegex, "ab?c"), 0.0f, 1)});
  EXPECT_TRUE(ok["ok"].text == "ac" || ok["ok"].text == "abc") << ok["ok"].text;
}

// complete_within_max_tokens: with max_tokens from the constraint's shortest output up,
// every output of the (random-weight) fixture model ends with a complete match and
// "stop"; every token is one the plain mask allows; without the option the same
// requests are cut off by max_tokens. The engine default applies to requests that leave
// it unset, and max_tokens below the shortest output is an InputError.
TEST(StructuredEngine, CompleteWithinMaxTokensAlwaysEndsWithAMatch) {
  EngineOptions o;
  o.model_dir = kModel;
  o.max_num_seqs = 128;
  auto e = Engine::create(o);
  Replay replay(e->vocab_size(), e->eos_token_id());
  struct Case {
    StructuredConstraint c;
    int64_t shortest;
  };
  std::vector<Case> cases = {
      {constraint(Kind::kJsonSchema, R"({"type":"object","properties":{"name":{"type":"string"},
          "tags":{"type":"array","items":{"type":"string"}},"n":{"type":"integer"}},"required":["name","tags","n"],
          "additionalProperties":false})"), 27},  // {"name":"","tags":[],"n":0}
      {constraint(Kind::kRegex, "[a-z]{2,}(-[a-z]+)*@[a-z]+\\.(com|org)"), 8},
      {constraint(Kind::kGrammar, "root ::= \"[\" (root (\",\" root)*)? \"]\"\n"), 2},
      {constraint(Kind::kJsonObject, ""), 2},
  };
  std::vector<GenerateRequest> reqs;
  std::vector<std::pair<size_t, bool>> meta;  // case, budget
  for (size_t ci = 0; ci < cases.size(); ++ci)
    for (int64_t extra : {0, 3, 12})
      for (uint64_t seed = 1; seed <= 2; ++seed)
        for (bool budget : {true, false}) {
          GenerateRequest r = request(str_cat(ci, "/", extra, "/", seed, budget ? "/on" : "/off"), *e, cases[ci].c,
                                      1.0f, seed, cases[ci].shortest + extra);
          r.params.structured->complete_within_max_tokens = budget;
          reqs.push_back(r);
          meta.push_back({ci, budget});
        }
  auto out = run_all(*e, reqs);
  int cut_without = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Result& r = out[reqs[i].request_id];
    const StructuredConstraint& c = cases[meta[i].first].c;
    EXPECT_EQ(replay.allowed_prefix(c, r), r.ids.size()) << reqs[i].request_id;
    EXPECT_LE(int64_t(r.ids.size()), reqs[i].params.max_tokens);
    if (!meta[i].second) {
      cut_without += r.finish_reason == "length";
      continue;
    }
    EXPECT_EQ(r.finish_reason, "stop") << reqs[i].request_id << ": " << r.text;
    std::string text = r.text;
    const bool json = c.kind == Kind::kJsonSchema || c.kind == Kind::kJsonObject;
    if (json && !text.empty() && text.back() == '\n') text.pop_back();  // the newline terminator
    EXPECT_TRUE(structured::matches(*constraints::compile(c), text)) << reqs[i].request_id << ": " << text;
  }
  EXPECT_GE(cut_without, 6) << "of 24";

  // n > 1: every sample has its own budget; synchronous scheduling gives the same bits.
  EngineOptions sync = o;
  sync.async_scheduling = false;
  auto es = Engine::create(sync);
  GenerateRequest many = request("many", *e, cases[2].c, 1.0f, 11, cases[2].shortest + 4);
  many.params.n = 4;
  many.params.structured->complete_within_max_tokens = true;
  std::map<int64_t, Result> by_engine[2];
  for (int k = 0; k < 2; ++k) {
    Engine& eng = k ? *es : *e;
    eng.add_request(many);
    while (eng.has_unfinished())
      for (const auto& out : eng.step()) {
        Result& r = by_engine[k][out.index];
        r.ids.insert(r.ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
        r.text += out.text_delta;
        if (out.finished) r.finish_reason = out.finish_reason;
      }
  }
  ASSERT_EQ(by_engine[0].size(), 4u);
  for (const auto& [index, r] : by_engine[0]) {
    EXPECT_EQ(r.finish_reason, "stop") << index << ": " << r.text;
    EXPECT_TRUE(structured::matches(*constraints::compile(cases[2].c), r.text)) << index << ": " << r.text;
    EXPECT_EQ(r.ids, by_engine[1][index].ids) << index;
  }

  // The engine default, overridden per request; the shortest output must fit.
  EngineOptions d = o;
  d.complete_within_max_tokens = true;
  auto ed = Engine::create(d);
  StructuredConstraint json_case = cases[0].c;
  auto unset = request("unset", *ed, json_case, 1.0f, 5, 30);
  auto off = request("off", *ed, json_case, 1.0f, 5, 30);
  off.params.structured->complete_within_max_tokens = false;
  auto both = run_all(*ed, {unset, off});
  EXPECT_EQ(both["unset"].finish_reason, "stop") << both["unset"].text;
  EXPECT_EQ(both["off"].finish_reason, "length") << both["off"].text;
  auto too_short = request("short", *ed, json_case, 1.0f, 5, 26);
  try {
    ed->add_request(too_short);
    ADD_FAILURE() << "max_tokens below the shortest output was accepted";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("shortest output of this json_schema constraint is 27 bytes"),
              std::string::npos)
        << err.what();
  }
  too_short.params.structured->complete_within_max_tokens = false;
  EXPECT_NO_THROW(ed->validate_request(too_short));
}

TEST(StructuredEngine, CacheSharesCompiledGrammarsAndIsBounded) {
  int vocab_builds = 0;
  constraints::Cache cache([&] {
    ++vocab_builds;
    structured::TokenVocab v;
    for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, char(b)));
    v.token_bytes.push_back("");
    v.eos_id = 256;
    return v;
  });
  auto a = cache.get(constraint(Kind::kRegex, "[0-9]+"));
  EXPECT_EQ(cache.get(constraint(Kind::kRegex, "[0-9]+")), a);
  EXPECT_NE(cache.get(constraint(Kind::kGrammar, "root ::= [0-9]+")), a);  // same text, other kind
  EXPECT_NE(cache.get(constraint(Kind::kJsonObject, "", 0)), cache.get(constraint(Kind::kJsonObject, "", 2)));
  EXPECT_EQ(cache.compiles(), 4);
  for (size_t i = 0; i < constraints::kCacheCapacity + 5; ++i) cache.get(constraint(Kind::kRegex, str_cat("a{", i, "}")));
  EXPECT_EQ(cache.size(), constraints::kCacheCapacity);
  EXPECT_EQ(vocab_builds, 1);
  EXPECT_THROW(cache.get(constraint(Kind::kRegex, "(")), InputError);
}

// The budget tables' cost is capped: states x (longest token + 1) <= kMaxBudgetWork.
TEST(StructuredEngine, BudgetTablesRefuseHugeWork) {
  constraints::Cache cache([] {
    structured::TokenVocab v;
    for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, char(b)));
    v.token_bytes.push_back(std::string(60000, 'a'));  // a 60,000-byte token
    v.token_bytes.push_back("");
    v.eos_id = 257;
    return v;
  });
  const StructuredConstraint small = constraint(Kind::kRegex, "[a-z]{20}");
  EXPECT_NO_THROW(constraints::check_budget(*cache.get(small), small, 20));
  EXPECT_THROW(constraints::check_budget(*cache.get(small), small, 19), InputError);
  const StructuredConstraint big = constraint(Kind::kRegex, "[a-z]{2000}");
  try {
    constraints::check_budget(*cache.get(big), big, 5000);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("too many for generation within a budget"), std::string::npos) << e.what();
  }
}

// The request fields of constraint_fields.h.
TEST(StructuredFields, ParsesEveryForm) {
  using nlohmann::json;
  auto parse = [](const json& body) { return constraints::constraint_from_request(body); };
  EXPECT_FALSE(parse(json{{"max_tokens", 3}}));
  EXPECT_FALSE(parse(json{{"response_format", {{"type", "text"}}}}));
  auto jo = parse(json{{"response_format", {{"type", "json_object"}}}});
  ASSERT_TRUE(jo);
  EXPECT_EQ(jo->constraint.kind, Kind::kJsonObject);
  auto js = parse(json::parse(
      R"({"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"integer"}}}})"));
  ASSERT_TRUE(js);
  EXPECT_EQ(js->constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(json::parse(js->constraint.spec), json({{"type", "integer"}}));
  EXPECT_EQ(js->constraint.max_whitespace, 0);
  auto so = parse(json::parse(R"({"structured_outputs":{"json":"{\"type\":\"string\"}","disable_any_whitespace":false}})"));
  ASSERT_TRUE(so);
  EXPECT_EQ(so->constraint.spec, "{\"type\":\"string\"}");
  EXPECT_EQ(so->constraint.max_whitespace, constraints::kFlexibleWhitespace);
  auto ch = parse(json::parse(R"({"guided_choice":["a","b"]})"));
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->constraint.kind, Kind::kChoice);
  EXPECT_EQ(ch->constraint.choices, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(parse(json::parse(R"({"guided_regex":"a+"})"))->constraint.kind, Kind::kRegex);
  EXPECT_EQ(parse(json::parse(R"({"structured_outputs":{"grammar":"root ::= \"a\""}})"))->constraint.kind, Kind::kGrammar);
  EXPECT_EQ(parse(json::parse(R"({"structured_outputs":{"choice":["a"]}})"))->param, "structured_outputs.choice");

  auto param_of = [&](const char* body) -> std::string {
    try {
      parse(json::parse(body));
    } catch (const constraints::FieldError& e) {
      return e.param();
    }
    return "(accepted)";
  };
  EXPECT_EQ(param_of(R"({"response_format":{"type":"json_object"},"guided_regex":"a"})"), "guided_regex");
  EXPECT_EQ(param_of(R"({"structured_outputs":{"regex":"a","json":{}}})"), "structured_outputs.regex");
  EXPECT_EQ(param_of(R"({"response_format":{"type":"yaml"}})"), "response_format.type");
  EXPECT_EQ(param_of(R"({"response_format":{"type":"json_schema"}})"), "response_format.json_schema");
  EXPECT_EQ(param_of(R"({"response_format":{"type":"json_schema","json_schema":{"name":"n"}}})"),
            "response_format.json_schema.schema");
  EXPECT_EQ(param_of(R"({"response_format":"json"})"), "response_format");
  EXPECT_EQ(param_of(R"({"guided_regex":5})"), "guided_regex");
  EXPECT_EQ(param_of(R"({"guided_choice":["a",1]})"), "guided_choice");
  EXPECT_EQ(param_of(R"({"guided_json":[1]})"), "guided_json");
  EXPECT_EQ(param_of(R"({"structured_outputs":{"structural_tag":"x"}})"), "structured_outputs.structural_tag");

  // complete_within_max_tokens (a DeepInfer extension), in either object.
  EXPECT_FALSE(parse(json::parse(R"({"guided_regex":"a+"})"))->constraint.complete_within_max_tokens.has_value());
  EXPECT_EQ(parse(json::parse(R"({"structured_outputs":{"regex":"a+","complete_within_max_tokens":true}})"))
                ->constraint.complete_within_max_tokens,
            std::optional<bool>(true));
  EXPECT_EQ(parse(json::parse(R"({"response_format":{"type":"json_object","complete_within_max_tokens":false}})"))
                ->constraint.complete_within_max_tokens,
            std::optional<bool>(false));
  EXPECT_EQ(parse(json::parse(R"({"guided_json":{},"structured_outputs":{"complete_within_max_tokens":true}})"))
                ->constraint.complete_within_max_tokens,
            std::optional<bool>(true));
  EXPECT_EQ(param_of(R"({"structured_outputs":{"regex":"a","complete_within_max_tokens":"yes"}})"),
            "structured_outputs.complete_within_max_tokens");
  EXPECT_EQ(param_of(R"({"response_format":{"type":"json_object","complete_within_max_tokens":1}})"),
            "response_format.complete_within_max_tokens");
  EXPECT_EQ(param_of(R"({"structured_outputs":{"complete_within_max_tokens":true}})"),
            "structured_outputs.complete_within_max_tokens");
  EXPECT_EQ(param_of(R"({"response_format":{"type":"text","complete_within_max_tokens":true}})"),
            "response_format.complete_within_max_tokens");
  EXPECT_EQ(param_of(R"({"response_format":{"type":"json_object","complete_within_max_tokens":true},
                         "structured_outputs":{"complete_within_max_tokens":false}})"),
            "structured_outputs.complete_within_max_tokens");
}

}  // namespace
}  // namespace deepinfer
