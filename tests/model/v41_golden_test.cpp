// Model-level goldens: tiny random V4.1 checkpoints made by the transformers
// reference (tools/make_fixtures.py), compared on full prefill, chunked prefill and
// token-by-token decode. See tests/fixtures/README.md for how they were made.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/safetensors.h"
#include "model/v41/model.h"
#include "golden_feeds.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> fixture_dirs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(DEEPINFER_FIXTURES))
    if (e.is_directory() && e.path().filename().string().rfind("v41_", 0) == 0 &&
        fs::exists(e.path() / "reference.safetensors"))
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<float> as_floats(const TensorView& t) {
  EXPECT_EQ(t.dtype, DType::F32);
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(std::isfinite(a[i]), std::isfinite(b[i])) << "at " << i;
    m = std::max(m, double(std::fabs(a[i] - b[i])));
  }
  return m;
}

TEST(V41Golden, FixturesExist) { EXPECT_GE(fixture_dirs().size(), 2u) << "golden fixtures are missing"; }

TEST(V41Golden, AllFeedingModesMatchReference) {
  for (const std::string& dir : fixture_dirs()) {
    SCOPED_TRACE(dir);
    auto model = v41::Model::load(dir);
    auto ref = SafetensorsFile::open(dir + "/reference.safetensors");
    const TensorView* tok = ref->find("tokens");
    ASSERT_NE(tok, nullptr);
    ASSERT_EQ(tok->dtype, DType::I64);
    const GoldenFeeds f = golden_feeds(*tok, ref->metadata());

    auto full = feed_cpu(*model, f.tokens, f.whole);
    auto chunked = feed_cpu(*model, f.tokens, f.chunks);
    auto stepped = feed_cpu(*model, f.tokens, f.decode);
    const double d_full = max_abs_diff(full, as_floats(*ref->find("logits_full")));
    const double d_chunk = max_abs_diff(chunked, as_floats(*ref->find("logits_chunked")));
    const double d_decode = max_abs_diff(stepped, as_floats(*ref->find("logits_decode")));
    std::printf("%s: max|diff| vs reference: full %.3g chunked %.3g decode %.3g\n", dir.c_str(), d_full, d_chunk,
                d_decode);
    EXPECT_LE(d_full, 1e-3);
    EXPECT_LE(d_chunk, 1e-3);
    EXPECT_LE(d_decode, 1e-3);
    EXPECT_LE(max_abs_diff(full, chunked), 1e-4);
    EXPECT_LE(max_abs_diff(full, stepped), 1e-4);
  }
}

}  // namespace
}  // namespace deepinfer
