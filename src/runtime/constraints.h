// Structured outputs in the engine: compiling a request's StructuredConstraint
// (include/deepinfer/engine.h), caching compiled grammars, and the per-request matcher
// state that feeds the sampler's token_bitmask.
//
// Policies, as the engine applies them:
//  * Vocabulary. The mask is exactly as wide as the logits. A token's bytes are what the
//    detokenizer emits for it (the ByteLevel decoder, special tokens skipped), so the
//    returned text is what the grammar matched. Ids beyond the tokenizer, holes and
//    special tokens are never allowed; EOS is allowed exactly when the constraint can
//    end at this point. Tokenizers without a per-token decoding (no decoder, or nested
//    ByteLevel decoders) refuse constraints with an InputError.
//  * End. After each sampled token the matcher advances and the next mask is computed
//    at once; when EOS is the only allowed token (or EOS itself was sampled), the
//    request finishes with "stop" without spending another forward pass on it.
//    Constrained requests still stop at max_tokens ("length") and at stop strings.
//  * Whitespace (JSON kinds). Compact JSON by default (no whitespace outside strings:
//    the fewest tokens, and a weak model cannot loop in whitespace); with
//    max_whitespace = N > 0, runs of at most N whitespace characters where JSON allows
//    them. Regex, GBNF and choice constraints allow exactly what they say, so an
//    unbounded `ws*` in a grammar is the grammar author's choice (max_tokens still ends it).
//  * Number digits (JSON kinds). Numbers are generated with at most 19 digits without a
//    point (every int64), 15 with one (each survives a round trip through a double, so
//    float-parsing consumers see what the grammar checked) and 2 exponent digits
//    (structured::kGenerationNumberDigits, justified in json_schema.h), widened where the
//    schema's minimum, maximum or multipleOf need more. Without a bound a weak model may
//    write digits until max_tokens; with it the number must end, and EOS or the next
//    JSON token follows. Not a request field (vLLM and OpenAI have none); `structured
//    check` validates existing text with unbounded numbers unless given --number-digits.
//  * Trailing newline (JSON kinds). JSON text may end in whitespace (RFC 8259), so once
//    the value is complete the tokens that spell exactly "\n" are allowed next to EOS and
//    end the request like it ("stop"; the newline stays in the text). Models trained on
//    code or chat end a value with a newline far more readily than with EOS; without this
//    a top-level number, which only EOS can end, runs on in digits until max_tokens.
//  * Budget (complete_within_max_tokens, off unless the request or the engine default
//    turns it on). With R tokens left before max_tokens, the next token is allowed only
//    if a complete match still fits in R - 1 more bytes after it
//    (GrammarMatcher::restrict_to_budget): every single byte is a token of a byte-level
//    BPE vocabulary, so the output then always completes and ends with "stop" (at the
//    last token only EOS or a terminator remains, which ends it at once). The request is
//    refused (InputError) when max_tokens is below the constraint's shortest output in
//    bytes; a vocabulary without all 256 single-byte tokens makes it a best effort (a
//    warning is printed once). Off, the masks are exactly the constraint's, so sampling
//    matches other engines; on, tokens near the end of the budget are removed too.
//  * A constraint that admits no output at all (e.g. the schema `false`) is an InputError.
//  * Logprobs are those of the masked distribution: the sampler applies the mask first
//    (sample/sampler.h step 1), so forbidden tokens never appear among top_logprobs and
//    the sampled token's logprob is renormalised over the allowed tokens.
//  * Preemption and recompute re-run the forward pass over known tokens without
//    sampling; the matcher is per request and advances only on sampled tokens, so its
//    state stays that of the output so far.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "deepinfer/engine.h"
#include "structured/compiled_grammar.h"
#include "structured/matcher.h"
#include "structured/token_masker.h"
#include "structured/vocab.h"

namespace deepinfer {

class Tokenizer;

namespace constraints {

constexpr int64_t kMaxWhitespace = 64;   // largest max_whitespace a request may ask for
constexpr size_t kMaxChoices = 4096;     // choice constraint: number of strings
constexpr size_t kCacheCapacity = 32;    // compiled grammars (with their mask caches) per engine
// complete_within_max_tokens: automaton states x (longest token + 1) the budget tables
// may cost (structured/budget.h), about a second of work at the cap.
constexpr uint64_t kMaxBudgetWork = uint64_t(64) << 20;

// Validates the constraint's own fields and compiles it. InputError with the
// compiler's message (prefixed by the kind) when it is invalid.
std::shared_ptr<const structured::CompiledGrammar> compile(const StructuredConstraint& c);

// "json_schema", "json_object", "regex", "grammar", "choice".
const char* kind_name(StructuredConstraint::Kind kind);

// Bytes per token id as the detokenizer emits them (see Vocabulary above); `width` is
// the logits width. InputError for tokenizers whose decoding is not per token.
structured::TokenVocab token_vocab(const Tokenizer& tokenizer, int64_t width, int64_t eos_id);

// Compiled grammars bound to the engine's vocabulary, keyed by the constraint, least
// recently used dropped beyond kCacheCapacity (requests holding one keep it alive).
// Thread-safe. The vocabulary index is built on first use.
class Cache {
 public:
  using VocabFn = std::function<structured::TokenVocab()>;
  explicit Cache(VocabFn make_vocab) : make_vocab_(std::move(make_vocab)) {}

  std::shared_ptr<structured::TokenMasker> get(const StructuredConstraint& c);
  // The token ids whose bytes are exactly "\n" (the JSON terminators above).
  std::vector<int64_t> newline_tokens();
  size_t size() const;
  int64_t compiles() const;  // how many compiles ran (cache misses that succeeded)

 private:
  std::shared_ptr<const structured::VocabIndex> vocab();

  VocabFn make_vocab_;
  mutable std::mutex mu_;
  std::shared_ptr<const structured::VocabIndex> vocab_;
  std::vector<int64_t> newline_ids_;
  std::list<std::pair<std::string, std::shared_ptr<structured::TokenMasker>>> lru_;  // front: newest
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  int64_t compiles_ = 0;
};

// Whether a constraint generates within its budget (the request's choice, else the
// engine's default).
inline bool within_budget(const StructuredConstraint& c, bool engine_default) {
  return c.complete_within_max_tokens.value_or(engine_default);
}

// For a request that generates within its budget: InputError when no complete match fits
// in max_tokens tokens of one byte each (the constraint's shortest output is longer), or
// when the grammar is too large for the budget tables (kMaxBudgetWork).
void check_budget(structured::TokenMasker& masker, const StructuredConstraint& c, int64_t max_tokens);

// One request's constraint state. Not thread-safe; different requests may be driven
// from different threads.
class RequestState {
 public:
  // terminators: tokens that end the output like EOS once the constraint can end
  // (the trailing newline of JSON kinds); empty for exact-match kinds.
  // max_tokens >= 0: generate within that budget (see Budget above); -1: no budget.
  RequestState(std::shared_ptr<structured::TokenMasker> masker, std::vector<int64_t> terminators = {},
               int64_t max_tokens = -1);

  // The mask for the next token (computed on first call after a change).
  const uint32_t* mask();
  // Whether the mask allows `token`.
  bool allows(int64_t token);

  enum class Next { kContinue, kComplete, kDead };
  // Advances by a sampled token and computes the next mask. kComplete: EOS or a
  // terminator was accepted, or only they are allowed next. kDead: the token was not allowed (never
  // for a token drawn under the mask) or no token at all can follow.
  Next advance(int64_t token);

 private:
  structured::GrammarMatcher matcher_;
  std::vector<uint32_t> mask_;
  bool mask_ready_ = false;
  int64_t eos_id_;
  std::vector<int64_t> terminators_;
  int64_t max_tokens_ = -1;  // the budget, or -1
  int64_t tokens_ = 0;       // tokens accepted so far
};

// mask() for every state, spread over the thread pool (TokenMasker caches are shared
// and thread-safe, matchers are per request).
void fill_masks(std::span<RequestState* const> states);
// advance(tokens[i]) for every state, in parallel; results[i] gets the outcome.
void advance_all(std::span<RequestState* const> states, std::span<const int64_t> tokens,
                 std::span<RequestState::Next> results);

}  // namespace constraints
}  // namespace deepinfer
