// SafetensorsFile and write_safetensors: round trips, then one test per way a header can
// be malformed, each checking that the error names the file, the tensor and the rule.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "safetensors_test_util.h"

namespace deepinfer {
namespace {

using testing_util::input_error;
using testing_util::make_file;
using testing_util::ScratchDir;

constexpr DType kAllDTypes[] = {DType::F32,     DType::F16,     DType::BF16, DType::F64, DType::F8_E4M3,
                                DType::F8_E5M2, DType::F8_E8M0, DType::I8,   DType::U8,  DType::I16,
                                DType::I32,     DType::I64,     DType::BOOL};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F8_E8M0), 1u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::BOOL), 1u);
  EXPECT_STREQ(dtype_name(DType::F8_E4M3), "F8_E4M3");
  EXPECT_STREQ(dtype_name(DType::BF16), "BF16");
  EXPECT_STREQ(dtype_name(DType::BOOL), "BOOL");
}

TEST(TensorView, NumelAndShapeStr) {
  TensorView v;
  v.shape = {2, 3, 4};
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.shape_str(), "[2, 3, 4]");
  v.shape = {};
  EXPECT_EQ(v.numel(), 1);
  EXPECT_EQ(v.shape_str(), "[]");
  v.shape = {5, 0};
  EXPECT_EQ(v.numel(), 0);
}

TEST(Safetensors, RoundTripAllDTypes) {
  ScratchDir dir;
  std::vector<TensorToWrite> tensors;
  uint32_t seed = 1;
  for (DType t : kAllDTypes) {
    std::vector<int64_t> shape = {3, static_cast<int64_t>(seed % 4 + 1)};
    size_t n = 3 * shape[1] * dtype_size(t);
    tensors.push_back({std::string("t.") + dtype_name(t), t, shape, random_bytes(n, seed++)});
  }
  tensors.push_back({"empty", DType::BF16, {0, 7}, {}});
  tensors.push_back({"scalar", DType::F32, {}, random_bytes(4, 99)});
  tensors.push_back({"empty.last", DType::I8, {4, 0}, {}});
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "héllo \"quoted\""}};
  const std::string path = (dir.path() / "rt.safetensors").string();
  write_safetensors(path, tensors, metadata);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->label(), path);
  EXPECT_EQ(file->metadata(), metadata);
  ASSERT_EQ(file->tensors().size(), tensors.size());
  const uint8_t* expected_data = nullptr;
  for (const TensorToWrite& t : tensors) {
    const TensorView* v = file->find(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_EQ(v->name, t.name);
    EXPECT_EQ(v->dtype, t.dtype) << t.name;
    EXPECT_EQ(v->shape, t.shape) << t.name;
    ASSERT_EQ(v->nbytes, t.bytes.size()) << t.name;
    // (memcmp of zero bytes still needs non-null pointers; an empty tensor's vector has none.)
    if (!t.bytes.empty()) {
      EXPECT_EQ(0, std::memcmp(v->data, t.bytes.data(), t.bytes.size())) << t.name;
    }
    // Tensors are laid out in the given order with no gaps.
    if (expected_data) {
      EXPECT_EQ(v->data, expected_data) << t.name;
    }
    expected_data = v->data + v->nbytes;
  }
  EXPECT_EQ(file->find("missing"), nullptr);

  // The header is space-padded so the data section starts 8-byte aligned.
  std::vector<uint8_t> raw(8);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(raw.data()), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[i];
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, EmptyFileRoundTrip) {
  ScratchDir dir;
  const std::string path = (dir.path() / "none.safetensors").string();
  write_safetensors(path, {});
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_TRUE(file->metadata().empty());
}

TEST(Safetensors, OverwritesExistingFile) {
  ScratchDir dir;
  const std::string path = (dir.path() / "w.safetensors").string();
  write_safetensors(path, {{"a", DType::U8, {2}, {1, 2}}});
  write_safetensors(path, {{"b", DType::U8, {1}, {3}}});
  auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->find("a"), nullptr);
  ASSERT_NE(file->find("b"), nullptr);
  EXPECT_EQ(file->find("b")->data[0], 3);
}

TEST(Safetensors, WriterRejectsBadInput) {
  ScratchDir dir;
  const std::string path = (dir.path() / "bad.safetensors").string();
  EXPECT_NE(input_error([&] { write_safetensors(path, {{"a", DType::F32, {2}, {1, 2, 3}}}); }).find("needs 8"),
            std::string::npos);
  EXPECT_NE(input_error([&] {
              write_safetensors(path, {{"a", DType::U8, {1}, {1}}, {"a", DType::U8, {1}, {1}}});
            }).find("given twice"),
            std::string::npos);
  EXPECT_NE(input_error([&] { write_safetensors(path, {{"", DType::U8, {1}, {1}}}); }).find("cannot write a tensor"),
            std::string::npos);
  EXPECT_NE(input_error([&] { write_safetensors(path, {{"n", DType::U8, {-1}, {}}}); }).find("negative"),
            std::string::npos);
  std::string msg = input_error([&] { write_safetensors((dir.path() / "no/such/dir/x").string(), {}); });
  EXPECT_NE(msg.find("cannot create"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Safetensors, FromBufferAcceptsZeroSizeTensorsAnywhere) {
  // Zero-size tensors may sit at the data end or inside another tensor's bytes.
  auto bytes = make_file(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
      R"("z1":{"dtype":"F32","shape":[0],"data_offsets":[2,2]},)"
      R"("z2":{"dtype":"F32","shape":[3,0],"data_offsets":[4,4]}})",
      4);
  auto file = SafetensorsFile::from_buffer(bytes.data(), bytes.size(), "buf");
  EXPECT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->find("z2")->nbytes, 0u);
  EXPECT_EQ(file->find("a")->data[3], 3);
}

TEST(Safetensors, FromBufferAcceptsTrailingSpacesAndUnknownFields) {
  auto bytes = make_file(R"({"a":{"dtype":"I16","shape":[2],"data_offsets":[0,4],"extra":1}}    )", 4);
  auto file = SafetensorsFile::from_buffer(bytes.data(), bytes.size(), "buf");
  EXPECT_EQ(file->find("a")->shape_str(), "[2]");
}

// ---------------------------------------------------------------------------------------
// Malformed files. Every message names the file label, and the tensor where there is one.
// ---------------------------------------------------------------------------------------

std::string parse_error(const std::vector<uint8_t>& bytes) {
  std::string msg = input_error([&] { SafetensorsFile::from_buffer(bytes.data(), bytes.size(), "bad.st"); });
  EXPECT_EQ(msg.rfind("bad.st: ", 0), 0u) << "message does not start with the file: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  return msg;
}

std::string one_tensor(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"w":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
}

#define EXPECT_MSG(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

TEST(SafetensorsMalformed, TruncatedFile) {
  std::vector<uint8_t> bytes = {1, 0, 0};
  EXPECT_MSG(parse_error(bytes), "too short");
  EXPECT_MSG(parse_error({}), "too short");
}

TEST(SafetensorsMalformed, HeaderLengthPastEof) {
  EXPECT_MSG(parse_error(make_file("{}", 0, 1000)), "runs past the end of the file");
}

TEST(SafetensorsMalformed, AbsurdHeaderLength) {
  EXPECT_MSG(parse_error(make_file("{}", 0, int64_t{1} << 40)), "absurd");
  EXPECT_MSG(parse_error(make_file("{}", 0, std::numeric_limits<int64_t>::max())), "absurd");
}

TEST(SafetensorsMalformed, NonJsonHeader) {
  EXPECT_MSG(parse_error(make_file("{\"a\": nope}")), "not valid JSON");
  EXPECT_MSG(parse_error(make_file("")), "not valid JSON");
  EXPECT_MSG(parse_error(make_file("{\"\xff\xfe\": 1}")), "not valid JSON");
}

TEST(SafetensorsMalformed, HeaderIsNotAnObject) {
  EXPECT_MSG(parse_error(make_file("[1, 2]")), "must be a JSON object");
  EXPECT_MSG(parse_error(make_file("7")), "must be a JSON object");
}

TEST(SafetensorsMalformed, EntryIsNotAnObject) {
  std::string msg = parse_error(make_file(R"({"w": [1]})"));
  EXPECT_MSG(msg, "tensor \"w\"");
  EXPECT_MSG(msg, "must be an object");
}

TEST(SafetensorsMalformed, UnknownDType) {
  std::string msg = parse_error(make_file(one_tensor("\"F7\"", "[1]", "[0,1]"), 1));
  EXPECT_MSG(msg, "tensor \"w\"");
  EXPECT_MSG(msg, "unknown dtype \"F7\"");
  EXPECT_MSG(parse_error(make_file(one_tensor("5", "[1]", "[0,1]"), 1)), "missing string field 'dtype'");
  EXPECT_MSG(parse_error(make_file(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1)), "'dtype'");
}

TEST(SafetensorsMalformed, NegativeShape) {
  std::string msg = parse_error(make_file(one_tensor("\"U8\"", "[2,-1]", "[0,0]")));
  EXPECT_MSG(msg, "tensor \"w\"");
  EXPECT_MSG(msg, "non-negative integers");
}

TEST(SafetensorsMalformed, NonIntegerShape) {
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "[2.0]", "[0,2]"), 2)), "non-negative integers");
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "[\"2\"]", "[0,2]"), 2)), "non-negative integers");
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "[9223372036854775808]", "[0,2]"), 2)),
             "non-negative integers");
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "{}", "[0,2]"), 2)), "'shape'");
}

TEST(SafetensorsMalformed, ShapeOverflow) {
  std::string msg = parse_error(make_file(one_tensor("\"U8\"", "[4294967296,4294967296]", "[0,1]"), 1));
  EXPECT_MSG(msg, "tensor \"w\"");
  EXPECT_MSG(msg, "overflows");
  // The element count fits but the byte count does not.
  EXPECT_MSG(parse_error(make_file(one_tensor("\"F64\"", "[4611686018427387904]", "[0,1]"), 1)), "overflows");
}

TEST(SafetensorsMalformed, OffsetsReversed) {
  std::string msg = parse_error(make_file(one_tensor("\"U8\"", "[0]", "[3,1]"), 4));
  EXPECT_MSG(msg, "tensor \"w\"");
  EXPECT_MSG(msg, "reversed");
}

TEST(SafetensorsMalformed, OffsetsPastEnd) {
  std::string msg = parse_error(make_file(one_tensor("\"F32\"", "[2]", "[0,8]"), 7));
  EXPECT_MSG(msg, "tensor \"w\"");
  EXPECT_MSG(msg, "past the end of the data section (7 bytes)");
}

TEST(SafetensorsMalformed, OffsetsNotTwoIntegers) {
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "[1]", "[0]"), 1)), "'data_offsets'");
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "[1]", "[0,1,2]"), 1)), "'data_offsets'");
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "[1]", "[-1,0]"), 1)), "non-negative integers");
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "[1]", "[0,1.5]"), 1)), "non-negative integers");
}

TEST(SafetensorsMalformed, SizeMismatchWithShape) {
  std::string msg = parse_error(make_file(one_tensor("\"BF16\"", "[2,3]", "[0,10]"), 16));
  EXPECT_MSG(msg, "tensor \"w\"");
  EXPECT_MSG(msg, "size mismatch");
  EXPECT_MSG(msg, "needs 12 bytes");
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  std::string msg = parse_error(make_file(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[3,7]}})",
      8));
  EXPECT_MSG(msg, "tensor \"b\" overlaps tensor \"a\"");
  // Identical ranges overlap too.
  EXPECT_MSG(parse_error(make_file(
                 R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})",
                 2)),
             "overlaps");
}

TEST(SafetensorsMalformed, MetadataNotStrings) {
  EXPECT_MSG(parse_error(make_file(R"({"__metadata__":{"format":1}})")),
             "__metadata__ value of \"format\" must be a string");
  EXPECT_MSG(parse_error(make_file(R"({"__metadata__":["pt"]})")), "__metadata__ must be an object");
}

TEST(SafetensorsMalformed, DuplicateKeys) {
  std::string msg = parse_error(make_file(
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
      2));
  EXPECT_MSG(msg, "duplicate key \"a\"");
  EXPECT_MSG(parse_error(make_file(one_tensor("\"U8\"", "[1]", "[0,1],\"dtype\":\"I8\""), 1)),
             "duplicate key \"dtype\"");
}

TEST(SafetensorsMalformed, DeepNesting) {
  std::string deep = R"({"w":)" + std::string(5000, '[') + std::string(5000, ']') + "}";
  EXPECT_MSG(parse_error(make_file(deep)), "nesting deeper");
}

TEST(SafetensorsMalformed, EmptyTensorName) {
  EXPECT_MSG(parse_error(make_file(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)),
             "names must not be empty");
}

TEST(SafetensorsMalformed, OpenMissingOrNonRegularFile) {
  ScratchDir dir;
  const std::string missing = (dir.path() / "missing.safetensors").string();
  std::string msg = input_error([&] { SafetensorsFile::open(missing); });
  EXPECT_MSG(msg, missing);
  EXPECT_MSG(msg, "cannot open");
  EXPECT_MSG(input_error([&] { SafetensorsFile::open(dir.str()); }), "not a regular file");
  const auto tiny = dir.path() / "tiny.safetensors";
  testing_util::write_bytes(tiny, {1, 2, 3});
  EXPECT_MSG(input_error([&] { SafetensorsFile::open(tiny.string()); }), "too short");
  const auto empty = dir.path() / "empty.safetensors";
  testing_util::write_bytes(empty, {});
  EXPECT_MSG(input_error([&] { SafetensorsFile::open(empty.string()); }), "too short");
}

}  // namespace
}  // namespace deepinfer
