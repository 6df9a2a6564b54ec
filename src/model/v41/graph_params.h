// The parameter block of a decode graph (model_cuda.cpp, forward_graph): the host image
// of every list a graph step's kernels read, each at the byte offset it had when the
// graph was captured, and the bookkeeping that lets a step rewrite and upload only what
// changed. Host code only (no CUDA), so the layout rules are tested on the CPU
// (tests/model/graph_params_test.cpp).
//
// Two regions, one after the other:
//   step:  lists that change every step (positions, window entry ids, block tables,
//          counts): written by every pass and uploaded by every step;
//   keyed: lists that depend only on which slot each row of the bucket holds, for
//          instance the pointers of the window-ring copies (ring of slot s, layer l ->
//          the pool rows of row i). A pass whose key (the slots in row order) equals the
//          one the block last uploaded skips building and writing them: the host image
//          and the device copy still hold them. Otherwise the pass writes them and the
//          step uploads both regions (still one copy: the keyed region follows).
//
// A bucket's lists have fixed capacities, so every pass reserves the same bytes in the
// same order; a pass that does not (a plan that depends on more than the bucket) is
// reported by end_pass() and must not be replayed.
//
//   GraphParamBlock pb;
//   pb.begin_sizing();  plan(pb);  pb.end_sizing();        // sizes only
//   (allocate pb.bytes() pinned on the host and on the device)
//   pb.begin_pass(host, dev, slots);  plan(pb);              // plan() calls put()
//   if (!pb.end_pass()) ...     // the layout changed: run eagerly
//   copy host[0, pb.upload_bytes()) to dev; launch;  pb.commit();
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/check.h"

namespace deepinfer::v41 {

class GraphParamBlock {
 public:
  enum class Region { kStep, kKeyed };
  static constexpr size_t kAlign = 16;  // every list starts on a 16-byte boundary (vector loads)

  // Sizing pass: put() only counts bytes (and returns null); end_sizing() fixes the
  // layout. Forgets any key: the block is about to be (re)allocated.
  void begin_sizing();
  void end_sizing();
  // The whole block; never empty (a zero-byte allocation has no address for the graph).
  size_t bytes() const { return std::max(keyed_begin_ + keyed_bytes_, kAlign); }
  size_t step_bytes() const { return step_bytes_; }
  size_t keyed_bytes() const { return keyed_bytes_; }

  // A writing pass into the host image `host` (bytes() long) whose device copy starts at
  // `dev`; `key` names the slot of each row. The keyed lists are built only when
  // keyed_needed(). A key that differs from the committed one is forgotten here, before
  // any write, so an abandoned pass never leaves a half-written region marked valid.
  void begin_pass(uint8_t* host, uint8_t* dev, const std::vector<int64_t>& key);
  // True in a writing pass whose keyed region does not hold this pass's key: the caller
  // must build the keyed lists and put() them. False when sizing or when they are valid.
  bool keyed_needed() const { return host_ != nullptr && !keyed_valid_; }
  bool writing() const { return host_ != nullptr; }

  // Reserves `cap` elements (at least one) of T in `region` and, in a writing pass,
  // writes `count` elements of `data` followed by `pad` up to `cap`. A keyed put in a
  // pass that does not need its lists writes nothing (data must then be empty: the
  // caller skipped building it). Returns the list's device address (null when sizing).
  template <class T>
  T* put(Region region, const T* data, size_t count, size_t cap, std::type_identity_t<T> pad = T()) {
    static_assert(std::is_trivially_copyable_v<T>);
    DI_CHECK(count <= cap, "graph step: a list of ", count, " exceeds its capacity ", cap);
    const size_t len = sizeof(T) * std::max<size_t>(cap, 1);
    size_t& cursor = region == Region::kStep ? step_off_ : keyed_off_;
    const size_t off = (cursor + kAlign - 1) / kAlign * kAlign;
    cursor = off + len;
    if (host_ == nullptr) return nullptr;  // sizing
    const size_t begin = region == Region::kStep ? 0 : keyed_begin_;
    const size_t limit = region == Region::kStep ? step_bytes_ : keyed_bytes_;
    // Past the sized layout: nothing written; end_pass() reports the mismatch.
    if (cursor > limit) {
      overflow_ = true;
      return reinterpret_cast<T*>(dev_ + begin);
    }
    const bool write = region == Region::kStep || !keyed_valid_;
    DI_CHECK(write || count == 0, "graph step: a keyed list was built although the block holds it");
    if (write) {
      T* h = reinterpret_cast<T*>(host_ + begin + off);
      if (count > 0) std::memcpy(static_cast<void*>(h), data, sizeof(T) * count);
      std::fill(h + count, h + std::max<size_t>(cap, 1), pad);
    }
    return reinterpret_cast<T*>(dev_ + begin + off);
  }
  template <class T>
  T* put(Region region, const std::vector<T>& v, size_t cap, std::type_identity_t<T> pad = T()) {
    return put<T>(region, v.data(), v.size(), cap, pad);
  }

  // Ends a writing pass: false when it did not reserve exactly the sized layout (do not
  // replay it). upload_bytes(): what to copy from the start of the block, the step
  // region, or the whole block when the keyed region was written in this pass.
  bool end_pass();
  size_t upload_bytes() const { return keyed_valid_ ? step_bytes_ : keyed_begin_ + keyed_bytes_; }
  // After the upload of end_pass()'s bytes is enqueued: the device copy holds this
  // pass's keyed lists, so passes with the same key may skip them.
  void commit();
  // Forgets the key (a new device buffer, a recapture).
  void invalidate() {
    has_key_ = false;
    key_.clear();
  }
  bool has_key() const { return has_key_; }

 private:
  size_t step_bytes_ = 0, keyed_bytes_ = 0, keyed_begin_ = 0;
  size_t step_off_ = 0, keyed_off_ = 0;
  uint8_t* host_ = nullptr;
  uint8_t* dev_ = nullptr;
  bool keyed_valid_ = false, overflow_ = false, ended_ = false, has_key_ = false;
  std::vector<int64_t> key_, pass_key_;
};

}  // namespace deepinfer::v41
