#include <gtest/gtest.h>

#include "sched/block_manager.h"

namespace deepinfer::sched {
namespace {

std::vector<int64_t> seq(int64_t n, int64_t start = 0) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

TEST(BlockManager, AllocateReleaseAndExhaustion) {
  BlockManager m(4, 2, 7);
  auto a = m.allocate(3);
  ASSERT_TRUE(a);
  EXPECT_EQ(m.num_available(), 1);
  EXPECT_FALSE(m.allocate(2));  // all-or-nothing
  EXPECT_EQ(m.num_available(), 1);
  m.release(*a);
  EXPECT_EQ(m.num_available(), 4);
}

TEST(BlockManager, CommittedBlocksAreSharedAndVerified) {
  BlockManager m(8, 4, 1);
  auto tokens = seq(10);
  auto t = *m.allocate(3);
  m.commit(t, 0, tokens);
  m.commit(t, 1, tokens);
  // Same prefix: two full blocks match (the third is not full / not committed).
  auto hit = m.match_and_take(tokens, 10);
  EXPECT_EQ(hit, (std::vector<int64_t>{t[0], t[1]}));
  EXPECT_EQ(m.refcount(t[0]), 2);
  // A different second block matches only the first.
  auto other = tokens;
  other[5] = 999;
  auto hit2 = m.match_and_take(other, 10);
  EXPECT_EQ(hit2, (std::vector<int64_t>{t[0]}));
  // max_blocks bounds the match.
  auto hit3 = m.match_and_take(tokens, 1);
  EXPECT_EQ(hit3.size(), 1u);
  m.release(hit);
  m.release(hit2);
  m.release(hit3);
}

TEST(BlockManager, UnreferencedCachedBlocksAreEvictedLastRecentlyUsedFirst) {
  BlockManager m(3, 2, 1);
  auto a = *m.allocate(1);
  auto b = *m.allocate(1);
  auto ta = seq(2, 100), tb = seq(2, 200);
  m.commit(a, 0, ta);
  m.commit(b, 0, tb);
  m.release(a);  // a becomes evictable first
  m.release(b);
  EXPECT_EQ(m.num_available(), 3);
  auto c = *m.allocate(2);  // the free block, then a (least recently used)
  EXPECT_TRUE(m.match_and_take(ta, 1).empty());
  auto hb = m.match_and_take(tb, 1);
  EXPECT_EQ(hb, b);
}

TEST(BlockManager, CommitNeedsTheChain) {
  BlockManager m(4, 2, 1);
  auto t = *m.allocate(2);
  auto tokens = seq(4);
  m.commit(t, 1, tokens);  // parent not committed: nothing happens
  EXPECT_FALSE(m.is_cached(t[1]));
  m.commit(t, 0, tokens);
  m.commit(t, 1, tokens);
  EXPECT_TRUE(m.is_cached(t[1]));
}

}  // namespace
}  // namespace deepinfer::sched
