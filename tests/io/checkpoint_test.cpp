// Checkpoint::open: the four ways a checkpoint can be laid out, and malformed indexes.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/safetensors.h"
#include "safetensors_test_util.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using testing_util::input_error;
using testing_util::ScratchDir;
using testing_util::write_text;

#define EXPECT_MSG(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

// A one-byte U8 tensor per name, holding value.
void write_shard(const fs::path& path, const std::vector<std::string>& names, uint8_t value = 7) {
  std::vector<TensorToWrite> tensors;
  for (const std::string& n : names) tensors.push_back({n, DType::U8, {1}, {value}});
  write_safetensors(path.string(), tensors);
}

std::string open_error(const ScratchDir& dir) {
  return input_error([&] { Checkpoint::open(dir.str()); });
}

TEST(Checkpoint, ShardedWithIndex) {
  ScratchDir dir;
  write_shard(dir.path() / "model-00001-of-00002.safetensors", {"a", "b", "extra"}, 1);
  write_shard(dir.path() / "model-00002-of-00002.safetensors", {"c"}, 2);
  // A shard the index does not name is ignored.
  write_shard(dir.path() / "stray.safetensors", {"a", "stray"}, 3);
  write_text(dir.path() / "model.safetensors.index.json", R"({
    "metadata": {"total_size": 3},
    "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                   "c": "model-00002-of-00002.safetensors"}})");
  auto ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt->num_files(), 2u);
  // "extra" is in a shard but not in the index: included, since released indexes can lag.
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a", "b", "c", "extra"}));
  EXPECT_EQ(ckpt->num_tensors(), 4u);
  ASSERT_NE(ckpt->find("c"), nullptr);
  EXPECT_EQ(ckpt->find("c")->data[0], 2);
  EXPECT_EQ(ckpt->find("a")->data[0], 1);
  EXPECT_EQ(ckpt->find("stray"), nullptr);
}

TEST(Checkpoint, SingleFilePreferredOverOthers) {
  ScratchDir dir;
  write_shard(dir.path() / "model.safetensors", {"x"}, 5);
  write_shard(dir.path() / "other.safetensors", {"x"}, 6);
  auto ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt->num_files(), 1u);
  EXPECT_EQ(ckpt->find("x")->data[0], 5);
}

TEST(Checkpoint, AllSafetensorsInDirectory) {
  ScratchDir dir;
  write_shard(dir.path() / "b.safetensors", {"y"}, 2);
  write_shard(dir.path() / "a.safetensors", {"x"}, 1);
  write_text(dir.path() / "README.md", "not weights");
  fs::create_directory(dir.path() / "sub.safetensors");  // a directory, not weights
  auto ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt->num_files(), 2u);
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(ckpt->find("y")->data[0], 2);
}

TEST(Checkpoint, PathIsAFile) {
  ScratchDir dir;
  write_shard(dir.path() / "w.safetensors", {"p", "q"});
  auto ckpt = Checkpoint::open((dir.path() / "w.safetensors").string());
  EXPECT_EQ(ckpt->num_tensors(), 2u);
}

TEST(Checkpoint, FollowsSymlinkedShards) {
  // The Hugging Face cache stores snapshot files as symlinks into blobs/.
  ScratchDir dir;
  fs::create_directory(dir.path() / "blobs");
  fs::create_directory(dir.path() / "snap");
  write_shard(dir.path() / "blobs" / "abc123", {"t"});
  fs::create_symlink("../blobs/abc123", dir.path() / "snap" / "model-1.safetensors");
  write_text(dir.path() / "snap" / "model.safetensors.index.json", R"({"weight_map": {"t": "model-1.safetensors"}})");
  auto ckpt = Checkpoint::open((dir.path() / "snap").string());
  EXPECT_NE(ckpt->find("t"), nullptr);
}

TEST(CheckpointMalformed, EmptyDirectory) {
  ScratchDir dir;
  std::string msg = open_error(dir);
  EXPECT_MSG(msg, "no safetensors weights in " + dir.str());
}

TEST(CheckpointMalformed, MissingPath) {
  ScratchDir dir;
  const std::string missing = (dir.path() / "nope").string();
  std::string msg = input_error([&] { Checkpoint::open(missing); });
  EXPECT_MSG(msg, missing);
  EXPECT_MSG(msg, "no such file or directory");
}

TEST(CheckpointMalformed, IndexEscapesDirectory) {
  for (const std::string shard : {"../x.safetensors", "/etc/passwd", "sub/x.safetensors", "..", "", "a\\\\b"}) {
    ScratchDir dir;
    write_text(dir.path() / "model.safetensors.index.json", R"({"weight_map": {"w": ")" + shard + R"("}})");
    std::string msg = open_error(dir);
    EXPECT_MSG(msg, "model.safetensors.index.json");
    EXPECT_MSG(msg, "weight_map[\"w\"]");
    EXPECT_MSG(msg, "not a plain file name");
  }
}

TEST(CheckpointMalformed, IndexNamesMissingShard) {
  ScratchDir dir;
  write_shard(dir.path() / "one.safetensors", {"a"});
  write_text(dir.path() / "model.safetensors.index.json",
             R"({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}})");
  std::string msg = open_error(dir);
  EXPECT_MSG(msg, "shard \"two.safetensors\" (holding tensor \"b\") does not exist");
}

TEST(CheckpointMalformed, IndexNamesTensorAbsentFromShard) {
  ScratchDir dir;
  write_shard(dir.path() / "one.safetensors", {"a"});
  write_text(dir.path() / "model.safetensors.index.json",
             R"({"weight_map": {"a": "one.safetensors", "ghost": "one.safetensors"}})");
  std::string msg = open_error(dir);
  EXPECT_MSG(msg, "tensor \"ghost\" is mapped to shard \"one.safetensors\" but that shard does not hold it");
}

TEST(CheckpointMalformed, IndexNotUsable) {
  ScratchDir dir;
  write_text(dir.path() / "model.safetensors.index.json", "{not json");
  EXPECT_MSG(open_error(dir), "not valid JSON");
  write_text(dir.path() / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_MSG(open_error(dir), "missing object field 'weight_map'");
  write_text(dir.path() / "model.safetensors.index.json", R"({"weight_map": {}})");
  EXPECT_MSG(open_error(dir), "weight_map is empty");
  write_text(dir.path() / "model.safetensors.index.json", R"({"weight_map": {"a": 3}})");
  EXPECT_MSG(open_error(dir), "must be a file name string");
  write_text(dir.path() / "model.safetensors.index.json", R"({"weight_map": {"a": "x", "a": "y"}})");
  EXPECT_MSG(open_error(dir), "duplicate key \"a\"");
}

TEST(CheckpointMalformed, DuplicateTensorAcrossFiles) {
  ScratchDir dir;
  write_shard(dir.path() / "a.safetensors", {"same"});
  write_shard(dir.path() / "b.safetensors", {"same"});
  std::string msg = open_error(dir);
  EXPECT_MSG(msg, "tensor \"same\" appears in both");
  EXPECT_MSG(msg, "a.safetensors");
  EXPECT_MSG(msg, "b.safetensors");
}

TEST(CheckpointMalformed, UnindexedDuplicateAcrossShards) {
  ScratchDir dir;
  write_shard(dir.path() / "a.safetensors", {"x", "dup"});
  write_shard(dir.path() / "b.safetensors", {"y", "dup"});
  write_text(dir.path() / "model.safetensors.index.json",
             R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})");
  EXPECT_MSG(open_error(dir), "tensor \"dup\" appears in both");
}

TEST(CheckpointMalformed, CorruptShardNamesFile) {
  ScratchDir dir;
  testing_util::write_bytes(dir.path() / "model.safetensors", {8, 0, 0, 0, 0, 0, 0, 0, '[', ']'});
  std::string msg = open_error(dir);
  EXPECT_MSG(msg, (dir.path() / "model.safetensors").string());
  EXPECT_MSG(msg, "runs past the end");
}

}  // namespace
}  // namespace deepinfer
