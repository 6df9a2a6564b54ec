// Stop-string detection over text that arrives in chunks (one detokenized token or more
// at a time), as the OpenAI API defines it: generation ends at the first stop string, and
// neither the stop string nor anything after it is returned.
//
// "First" means the match that completes first when the text is read byte by byte: the
// earliest end, then the longest match (earliest start), then the lower index in the
// list. That rule is what makes the outcome independent of how the text is chunked; an
// "earliest start" rule is not (stops {"bcd", "abcdef"} on "abcdef" would stop at 0 when
// the text comes in one chunk but at 1 when "abcd" arrives first).
//
// Streaming: bytes at the end of the text that could still grow into a stop string must
// not be sent yet. `holdback` counts them, and the safe prefix only ever grows, so a
// client never sees bytes that are later retracted.
//
//   StopMatcher m(params.stop);
//   for each detokenized chunk:
//     StopResult r = m.feed(chunk);
//     send text[sent, r.output_end); sent = r.output_end;
//     if (r.stopped) finish with reason "stop";
//   at the end of generation (length, EOS): send the held-back tail too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::sampling {

struct StopResult {
  bool stopped = false;
  size_t stop_index = 0;  // stopped: which stop string matched
  // stopped: the output is text[0, output_end); the stop string starts at output_end.
  // otherwise: text[0, output_end) can be streamed; the rest is held back.
  size_t output_end = 0;
  size_t holdback = 0;  // not stopped: trailing bytes that could begin a stop string
};

// Incremental matcher for one choice of one request. O(bytes x stop strings) in total,
// whatever the chunking (one Knuth-Morris-Pratt automaton per stop string). Positions in
// results count from the first byte ever fed. Not thread safe; one per stream.
class StopMatcher {
 public:
  // Stop strings must be non-empty (SamplingParams::validate ensures it).
  explicit StopMatcher(std::span<const std::string> stops);

  // Appends `chunk` to the text and reports on the text so far. Once stopped, further
  // chunks are ignored and the same result is returned.
  StopResult feed(std::string_view chunk);

  size_t bytes_fed() const { return fed_; }

 private:
  friend StopResult find_stop(std::string_view text, size_t new_begin, std::span<const std::string> stops);

  struct Pattern {
    std::string text;
    std::vector<uint32_t> fail;  // KMP failure function
  };
  // Advances every automaton over `chunk`; reports matches only when `report` is set.
  StopResult advance(std::string_view chunk, bool report);

  std::vector<Pattern> patterns_;
  std::vector<uint32_t> matched_;  // per pattern: longest suffix of the text that is its prefix
  size_t fed_ = 0;
  bool stopped_ = false;
  StopResult result_;
};

// The stateless form: `text` is everything generated so far and text[new_begin, end) is
// the part not checked before. Finds a stop string that ends inside the new part (one
// that ended earlier would have been reported by the earlier call) and computes the
// holdback of the whole text. Costs O((new bytes + longest stop) x stop strings).
StopResult find_stop(std::string_view text, size_t new_begin, std::span<const std::string> stops);

}  // namespace deepinfer::sampling
