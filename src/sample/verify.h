// Single-position primitives of speculative verification (FEATURES.md §2).
//
// The target's row p and the drafter's row q are ProcessedRows (sample/sampler.h): the
// exact distributions the tokens are drawn from, masks and temperature included. A
// greedy row is a point mass on its argmax, which covers the variants of §2:
//   - sampled draft, sampled target: the standard rule below;
//   - greedy (point-mass) draft: acceptance is p(x), the residual is p without x;
//   - greedy target: accept iff x is p's argmax, else emit that argmax.
// One verify step at position t, for draft token x drawn from q with purpose kDraft:
//
//   if (accept_draft(p, q, x, seed, t)) commit x and go on to position t + 1;
//   else { commit sample_residual(p, q, seed, t); stop; }
//
// and after ell accepted drafts the bonus token is draw(p_next, seed, t', kTarget).
// The committed token then has law p exactly: min(p, q) by acceptance plus
// (1 - sum min(p, q)) * norm(max(0, p - q)) by the residual.
//
// Seed-exact mode (§2, our default in deterministic mode) needs no primitive of its own:
// accept x iff x == draw(p, seed, t, Purpose::kTarget), and always commit that draw, which
// is the token a non-speculative run would have sampled at t.
#pragma once

#include <cstdint>

#include "sample/sampler.h"

namespace deepinfer::sampling {

// Accepts draft token `token` iff u < p(token) / q(token), with
// u = uniform(seed, position, Purpose::kAccept, 0). q(token) must be > 0 (the draft was
// drawn from q). Uniforms have 23-bit resolution, so acceptance probabilities are exact
// to within 2^-24.
bool accept_draft(const ProcessedRow& target, const ProcessedRow& draft, int64_t token, uint64_t seed,
                  int64_t position);

// Draws from norm(max(0, p - q)) with Gumbel-max keyed by (seed, position,
// Purpose::kResidual, v), in FP64. If rounding leaves no positive mass (p == q, where a
// rejection can only come from rounding), it draws from p with the same key instead.
int64_t sample_residual(const ProcessedRow& target, const ProcessedRow& draft, uint64_t seed, int64_t position);

}  // namespace deepinfer::sampling
