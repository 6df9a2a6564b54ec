// The decode graphs' parameter block (model/v41/graph_params.h): the layout a sizing
// pass fixes, the keyed lists written only when the rows' slots change, the upload
// extent, and passes whose layout differs (never replayed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/v41/graph_params.h"

namespace deepinfer::v41 {
namespace {

using Region = GraphParamBlock::Region;

// One "step" of a fake plan: a step list of `n` positions (capacity 8) and a keyed list
// built from the slots (capacity 8), as model_cuda's attention does with its lists.
struct Plan {
  int builds = 0;  // times the keyed list was built
  int64_t* step_ptr = nullptr;
  int64_t* keyed_ptr = nullptr;
  void operator()(GraphParamBlock& pb, const std::vector<int64_t>& positions, const std::vector<int64_t>& slots) {
    step_ptr = pb.put(Region::kStep, positions, 8, -1);
    std::vector<int64_t> keyed;
    if (pb.keyed_needed()) {
      ++builds;
      for (int64_t s : slots) keyed.push_back(1000 + s);
    }
    keyed_ptr = pb.put(Region::kKeyed, keyed, 8, -2);
  }
};

struct Block {
  GraphParamBlock pb;
  std::vector<uint8_t> host, dev;  // dev stands in for the device copy (addresses only)
  void alloc() {
    host.assign(pb.bytes(), 0xEE);
    dev.assign(pb.bytes(), 0);
  }
  const int64_t* host_at(const void* dev_ptr) const {
    return reinterpret_cast<const int64_t*>(host.data() + (static_cast<const uint8_t*>(dev_ptr) - dev.data()));
  }
};

TEST(GraphParamBlock, SizingFixesTheLayoutAndPassesWriteIntoIt) {
  Block b;
  Plan plan;
  b.pb.begin_sizing();
  plan(b.pb, {5, 6}, {3, 1});
  EXPECT_EQ(plan.step_ptr, nullptr);  // sizing returns no addresses
  b.pb.end_sizing();
  EXPECT_EQ(b.pb.step_bytes(), 64u);
  EXPECT_EQ(b.pb.keyed_bytes(), 64u);
  EXPECT_EQ(b.pb.bytes(), 128u);
  EXPECT_EQ(plan.builds, 0);  // sizing never builds keyed lists
  b.alloc();

  b.pb.begin_pass(b.host.data(), b.dev.data(), {3, 1});
  plan(b.pb, {5, 6}, {3, 1});
  ASSERT_TRUE(b.pb.end_pass());
  EXPECT_EQ(plan.builds, 1);
  // Step region first, keyed region after it; device addresses mirror host offsets.
  EXPECT_EQ(reinterpret_cast<uint8_t*>(plan.step_ptr), b.dev.data());
  EXPECT_EQ(reinterpret_cast<uint8_t*>(plan.keyed_ptr), b.dev.data() + 64);
  const int64_t* s = b.host_at(plan.step_ptr);
  const int64_t* k = b.host_at(plan.keyed_ptr);
  EXPECT_EQ(std::vector<int64_t>(s, s + 8), (std::vector<int64_t>{5, 6, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(std::vector<int64_t>(k, k + 8), (std::vector<int64_t>{1003, 1001, -2, -2, -2, -2, -2, -2}));
  EXPECT_EQ(b.pb.upload_bytes(), 128u);  // the keyed lists were written: upload both
}

TEST(GraphParamBlock, KeyedListsAreRebuiltOnlyWhenTheSlotsChange) {
  Block b;
  Plan plan;
  b.pb.begin_sizing();
  plan(b.pb, {0}, {0});
  b.pb.end_sizing();
  b.alloc();
  auto step = [&](std::vector<int64_t> pos, std::vector<int64_t> slots, bool commit = true) {
    b.pb.begin_pass(b.host.data(), b.dev.data(), slots);
    plan(b.pb, pos, slots);
    EXPECT_TRUE(b.pb.end_pass());
    const size_t up = b.pb.upload_bytes();
    if (commit) b.pb.commit();
    return up;
  };
  EXPECT_EQ(step({1, 2}, {4, 2}), 128u);
  EXPECT_EQ(plan.builds, 1);
  // Same slots, new positions: only the step region is written and uploaded.
  EXPECT_EQ(step({2, 3}, {4, 2}), 64u);
  EXPECT_EQ(plan.builds, 1);
  const int64_t* s = b.host_at(plan.step_ptr);
  const int64_t* k = b.host_at(plan.keyed_ptr);
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s[1], 3);
  EXPECT_EQ(k[0], 1004);  // still the first pass's keyed lists
  EXPECT_EQ(k[1], 1002);
  // Another order of the same slots is another key: rows hold other slots.
  EXPECT_EQ(step({3, 4}, {2, 4}), 128u);
  EXPECT_EQ(plan.builds, 2);
  EXPECT_EQ(k[0], 1002);
  EXPECT_EQ(k[1], 1004);
  // A pass that is not committed (its step fell back to eager) leaves no key behind
  // when its key differed: the next pass with the old key rebuilds.
  EXPECT_EQ(step({4}, {9}, /*commit=*/false), 128u);
  EXPECT_EQ(plan.builds, 3);
  EXPECT_EQ(step({5, 6}, {2, 4}), 128u);
  EXPECT_EQ(plan.builds, 4);
  // A new sizing (recapture, new buffers) forgets the key.
  b.pb.begin_sizing();
  plan(b.pb, {0}, {0});
  b.pb.end_sizing();
  EXPECT_FALSE(b.pb.has_key());
  EXPECT_EQ(step({6, 7}, {2, 4}), 128u);
  EXPECT_EQ(plan.builds, 5);
}

TEST(GraphParamBlock, APassWithAnotherLayoutIsNotReplayable) {
  Block b;
  b.pb.begin_sizing();
  b.pb.put(Region::kStep, std::vector<int32_t>{1, 2, 3}, 4);
  b.pb.end_sizing();
  EXPECT_EQ(b.pb.step_bytes(), 16u);
  b.alloc();
  // One list more than sized: nothing past the layout is written, and end_pass says no.
  b.pb.begin_pass(b.host.data(), b.dev.data(), {0});
  b.pb.put(Region::kStep, std::vector<int32_t>{1}, 4);
  b.pb.put(Region::kStep, std::vector<int32_t>{7, 7}, 4);
  EXPECT_FALSE(b.pb.end_pass());
  EXPECT_TRUE(std::all_of(b.host.begin() + 16, b.host.end(), [](uint8_t v) { return v == 0xEE; }));
  // One list fewer: also not replayable.
  b.pb.begin_pass(b.host.data(), b.dev.data(), {0});
  EXPECT_FALSE(b.pb.end_pass());
  // The sized layout again: replayable.
  b.pb.begin_pass(b.host.data(), b.dev.data(), {0});
  b.pb.put(Region::kStep, std::vector<int32_t>{9}, 4);
  EXPECT_TRUE(b.pb.end_pass());
}

TEST(GraphParamBlock, ListsAreAlignedAndNeverEmpty) {
  GraphParamBlock pb;
  pb.begin_sizing();
  pb.put(Region::kStep, std::vector<uint8_t>{1}, 3);    // 3 bytes
  pb.put(Region::kStep, std::vector<int64_t>{}, 0);     // still one element
  pb.put(Region::kKeyed, std::vector<int32_t>{}, 1);    // 4 bytes
  pb.end_sizing();
  EXPECT_EQ(pb.step_bytes(), 24u);  // 3, padded to 16, + 8
  EXPECT_EQ(pb.keyed_bytes(), 4u);
  EXPECT_EQ(pb.bytes(), 32u + 4u);  // the keyed region starts aligned
  GraphParamBlock empty;
  empty.begin_sizing();
  empty.end_sizing();
  EXPECT_EQ(empty.bytes(), GraphParamBlock::kAlign);  // an allocation with an address
}

}  // namespace
}  // namespace deepinfer::v41
