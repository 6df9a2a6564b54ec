#include "runtime/constraints.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "common/check.h"
#include "common/parallel.h"
#include "structured/structured.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace constraints {
namespace {

using Kind = StructuredConstraint::Kind;

// A GBNF literal for arbitrary bytes: quotes, backslashes and control bytes escaped,
// everything else (UTF-8 included) as is.
std::string gbnf_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

structured::JsonSchemaOptions json_options(const StructuredConstraint& c) {
  structured::JsonSchemaOptions o;
  if (c.max_whitespace == 0) {
    o.whitespace = structured::JsonSchemaOptions::Whitespace::kCompact;
  } else {
    o.whitespace = structured::JsonSchemaOptions::Whitespace::kFlexible;
    o.max_whitespace = int(c.max_whitespace);
  }
  o.number_digits = structured::kGenerationNumberDigits;
  return o;
}

// The cache key: every field that changes the compiled grammar, length-prefixed so that
// no two constraints share a key.
std::string cache_key(const StructuredConstraint& c) {
  std::string k = str_cat(int(c.kind), ':', c.max_whitespace, ':', c.spec.size(), ':', c.spec);
  for (const std::string& s : c.choices) k += str_cat(':', s.size(), ':', s);
  return k;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kJsonSchema: return "json_schema";
    case Kind::kJsonObject: return "json_object";
    case Kind::kRegex: return "regex";
    case Kind::kGrammar: return "grammar";
    case Kind::kChoice: return "choice";
  }
  return "unknown";
}

std::shared_ptr<const structured::CompiledGrammar> compile(const StructuredConstraint& c) {
  DI_CHECK_INPUT(c.max_whitespace >= 0 && c.max_whitespace <= kMaxWhitespace,
                 "structured output max_whitespace must be in [0, ", kMaxWhitespace, "], got ", c.max_whitespace);
  const bool uses_spec = c.kind == Kind::kJsonSchema || c.kind == Kind::kRegex || c.kind == Kind::kGrammar;
  DI_CHECK_INPUT(uses_spec || c.spec.empty(), "a ", kind_name(c.kind), " constraint takes no spec");
  DI_CHECK_INPUT(c.kind == Kind::kChoice || c.choices.empty(), "only a choice constraint takes choices");
  try {
    switch (c.kind) {
      case Kind::kJsonSchema:
        return structured::compile_json_schema(c.spec, json_options(c));
      case Kind::kJsonObject:
        return structured::compile_json_schema(R"({"type":"object"})", json_options(c));
      case Kind::kRegex:
        return structured::compile_regex(c.spec);
      case Kind::kGrammar:
        return structured::compile_gbnf(c.spec);
      case Kind::kChoice: {
        DI_CHECK_INPUT(!c.choices.empty(), "the list of choices is empty");
        DI_CHECK_INPUT(c.choices.size() <= kMaxChoices, "more than ", kMaxChoices, " choices");
        std::string g = "root ::= ";
        for (size_t i = 0; i < c.choices.size(); ++i) {
          DI_CHECK_INPUT(!c.choices[i].empty(), "choice ", i, " is an empty string");
          g += (i ? " | " : "") + gbnf_literal(c.choices[i]);
        }
        return structured::compile_gbnf(g);
      }
    }
  } catch (const InputError& e) {
    throw InputError(str_cat("invalid ", kind_name(c.kind), " constraint: ", e.what()));
  } catch (const std::bad_alloc&) {
    throw InputError(str_cat("invalid ", kind_name(c.kind), " constraint: out of memory while compiling"));
  }
  throw InputError("unknown structured constraint kind");
}

structured::TokenVocab token_vocab(const Tokenizer& tok, int64_t width, int64_t eos_id) {
  const int steps = tok.byte_level_steps();
  // No decoder joins tokens with spaces, nested ByteLevel decoders re-read the whole
  // text: neither gives a token its own bytes.
  DI_CHECK_INPUT(steps == 0 || steps == 1,
                 "structured outputs need a tokenizer whose decoder maps each token to its own bytes "
                 "(a ByteLevel decoder, or none inside a Sequence)");
  structured::TokenVocab v;
  v.token_bytes.resize(size_t(width));
  v.eos_id = eos_id >= 0 && eos_id < width ? eos_id : -1;
  const int64_t n = std::min(width, tok.size());
  for (int64_t id = 0; id < n; ++id) {
    if (!tok.has_token(id) || tok.is_special(id) || id == v.eos_id) continue;
    const std::string t = tok.id_to_token(id);
    v.token_bytes[size_t(id)] = steps == 1 ? byte_level::decode_token(t) : t;
  }
  return v;
}

std::shared_ptr<const structured::VocabIndex> Cache::vocab() {
  // Called with mu_ held.
  if (!vocab_) {
    vocab_ = std::make_shared<const structured::VocabIndex>(make_vocab_());
    for (uint32_t r = 0; r < vocab_->num_ranks(); ++r)
      if (vocab_->rank_bytes(r) == "\n")
        for (int32_t id : vocab_->rank_tokens(r)) newline_ids_.push_back(id);
  }
  return vocab_;
}

std::vector<int64_t> Cache::newline_tokens() {
  std::lock_guard<std::mutex> lk(mu_);
  vocab();
  return newline_ids_;
}

std::shared_ptr<structured::TokenMasker> Cache::get(const StructuredConstraint& c) {
  const std::string key = cache_key(c);
  std::shared_ptr<const structured::VocabIndex> v;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    v = vocab();
  }
  // Compile outside the lock: a slow schema must not hold up other requests. Two
  // threads may compile the same constraint at once; the first to insert wins.
  auto masker = std::make_shared<structured::TokenMasker>(compile(c), v);
  {
    // The first mask is needed by every request anyway; an empty one means no output
    // can satisfy the constraint.
    structured::GrammarMatcher m(masker);
    std::vector<uint32_t> words(m.mask_words());
    m.fill_next_token_bitmask(words);
    bool any = false;
    for (uint32_t w : words) any |= w != 0;
    DI_CHECK_INPUT(any, "invalid ", kind_name(c.kind), " constraint: no output can satisfy it");
  }
  std::lock_guard<std::mutex> lk(mu_);
  ++compiles_;
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;
  lru_.emplace_front(key, masker);
  index_[key] = lru_.begin();
  while (lru_.size() > kCacheCapacity) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return masker;
}

size_t Cache::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return lru_.size();
}

int64_t Cache::compiles() const {
  std::lock_guard<std::mutex> lk(mu_);
  return compiles_;
}

void check_budget(structured::TokenMasker& masker, const StructuredConstraint& c, int64_t max_tokens) {
  const structured::CompiledGrammar& g = masker.grammar();
  // The tables cost a pass over the grammar per byte of the longest token: refuse what
  // would take seconds (a grammar near the compile caps) instead of stalling the engine.
  const uint64_t work = uint64_t(g.num_states()) * uint64_t(masker.vocab().max_token_bytes() + 1);
  DI_CHECK_INPUT(work <= kMaxBudgetWork, "complete_within_max_tokens: the ", kind_name(c.kind), " constraint has ",
                 g.num_states(), " automaton states, too many for generation within a budget (at most ",
                 kMaxBudgetWork / (masker.vocab().max_token_bytes() + 1), " with this vocabulary)");
  const structured::BudgetTables& bt = masker.budget();
  const uint32_t shortest = g.num_rules() ? bt.rule_min(g.root()) : structured::BudgetTables::kInf;
  DI_CHECK_INPUT(int64_t(shortest) <= max_tokens, "complete_within_max_tokens: the shortest output of this ",
                 kind_name(c.kind), " constraint is ", shortest, " bytes, and max_tokens (", max_tokens,
                 ") cannot guarantee it (a token may be a single byte); raise max_tokens or turn "
                 "complete_within_max_tokens off");
  if (!bt.all_single_bytes()) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      std::fprintf(stderr,
                   "deepinfer: warning: the vocabulary lacks a token for some single byte; "
                   "complete_within_max_tokens is a best effort with this model (a complete match "
                   "within max_tokens is not guaranteed)\n");
    });
  }
}

RequestState::RequestState(std::shared_ptr<structured::TokenMasker> masker, std::vector<int64_t> terminators,
                           int64_t max_tokens)
    : matcher_(masker), mask_(matcher_.mask_words()), eos_id_(masker->vocab().eos_id()),
      terminators_(std::move(terminators)), max_tokens_(max_tokens) {}

const uint32_t* RequestState::mask() {
  if (!mask_ready_) {
    matcher_.fill_next_token_bitmask(mask_);
    // Before the terminators: they end the output, they are not part of the match.
    if (max_tokens_ >= 0) matcher_.restrict_to_budget(mask_, max_tokens_ - tokens_);
    if (matcher_.can_end())
      for (int64_t t : terminators_) mask_[t >> 5] |= uint32_t(1) << (t & 31);
    mask_ready_ = true;
  }
  return mask_.data();
}

bool RequestState::allows(int64_t token) {
  const uint32_t* m = mask();
  return token >= 0 && size_t(token >> 5) < mask_.size() && ((m[token >> 5] >> (token & 31)) & 1u);
}

RequestState::Next RequestState::advance(int64_t token) {
  const bool ending = matcher_.can_end();
  if (!matcher_.accept_token(token)) {
    const bool terminator = std::find(terminators_.begin(), terminators_.end(), token) != terminators_.end();
    return ending && terminator ? Next::kComplete : Next::kDead;
  }
  ++tokens_;
  mask_ready_ = false;
  if (matcher_.is_terminated()) return Next::kComplete;  // EOS accepted
  const uint32_t* m = mask();
  std::vector<uint32_t> enders(mask_.size(), 0);  // EOS and the terminators
  if (eos_id_ >= 0) enders[eos_id_ >> 5] |= uint32_t(1) << (eos_id_ & 31);
  for (int64_t t : terminators_) enders[t >> 5] |= uint32_t(1) << (t & 31);
  bool other = false;  // any token but the enders allowed next
  for (size_t w = 0; w < mask_.size() && !other; ++w) other = (m[w] & ~enders[w]) != 0;
  if (other) return Next::kContinue;
  return matcher_.can_end() ? Next::kComplete : Next::kDead;
}

void fill_masks(std::span<RequestState* const> states) {
  parallel_for(
      int64_t(states.size()),
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) states[i]->mask();
      },
      /*min_grain=*/1);
}

void advance_all(std::span<RequestState* const> states, std::span<const int64_t> tokens,
                 std::span<RequestState::Next> results) {
  DI_CHECK(states.size() == tokens.size() && states.size() == results.size(), "advance_all: sizes differ");
  parallel_for(
      int64_t(states.size()),
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) results[i] = states[i]->advance(tokens[i]);
      },
      /*min_grain=*/1);
}

}  // namespace constraints

// The default for engines without a vocabulary of their own (test engines): the grammar
// alone, so that invalid constraints are still refused.
void Engine::check_constraint(const StructuredConstraint& c) const { (void)constraints::compile(c); }

}  // namespace deepinfer
