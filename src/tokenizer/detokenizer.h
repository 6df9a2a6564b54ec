// Streaming decode: text for each generated id as soon as it is final. The pieces
// concatenate to exactly Tokenizer::decode(all ids, skip_special); no piece ends inside
// a UTF-8 sequence, because bytes that could still become part of a character are held
// back until the next id completes them (or finish() replaces them with U+FFFD, as
// decode does).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer {

class Tokenizer;

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special);

  // The newly complete text after `id`. InputError when id is outside the tokenizer's
  // range (the state is unchanged then).
  std::string push(int64_t id);
  // Whatever is still held back; the object can then be reused for a new sequence.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;        // ByteLevel decoder: bytes not yet returned
  bool emitted_token_ = false;  // no decoder: whether a separating space is due
  std::vector<int64_t> ids_;   // decoders we cannot stream: everything until finish()
};

}  // namespace deepinfer
