// Reading and writing safetensors files (https://huggingface.co/docs/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON mapping tensor names to
// {dtype, shape, data_offsets}, then the raw data. Files are memory-mapped; views
// point into the mapping and stay valid while the owning object lives.
//
// Every header is hostile input: sizes, offsets, dtypes and shapes are validated
// (bounds, overlaps, products that overflow, absurd header sizes) and any problem is
// an InputError naming the file and the tensor, never a crash.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace deepinfer {

enum class DType { F32, F16, BF16, F64, F8_E4M3, F8_E5M2, F8_E8M0, I8, U8, I16, I32, I64, BOOL };

// Bytes per element.
size_t dtype_size(DType t);
const char* dtype_name(DType t);  // the safetensors spelling, e.g. "F8_E4M3"

// A tensor inside a mapped file (or an owned buffer). Does not own its data. data
// points at nbytes bytes and carries no alignment guarantee beyond what the writer chose.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
  std::string shape_str() const;  // "[a, b]"
};

// One memory-mapped .safetensors file.
class SafetensorsFile {
 public:
  // Throws InputError on any malformed header or file.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Parses a header from an in-memory buffer (used by the fuzz target and tests).
  // The buffer must outlive the returned object.
  static std::unique_ptr<SafetensorsFile> from_buffer(const uint8_t* data, size_t size, const std::string& label);
  ~SafetensorsFile();

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorView* find(const std::string& name) const;
  // The path (or the label given to from_buffer) used in error messages.
  const std::string& label() const { return label_; }

 private:
  SafetensorsFile() = default;
  void parse(const std::string& label);
  std::string label_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // munmap on destruction when non-null
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A model directory: model.safetensors, or shards listed in
// model.safetensors.index.json ("weight_map": name -> file). Every shard named by
// the index must exist and hold the tensors the index says it holds.
//
// Lookup order in open(path):
//   1. path is a file: that one file.
//   2. path/model.safetensors.index.json: the shards it names (plain file names inside
//      path only). Tensors a shard holds but the index omits are included as well.
//   3. path/model.safetensors.
//   4. every *.safetensors in path; a name held by two files is an error.
// Otherwise InputError "no safetensors weights in PATH".
class Checkpoint {
 public:
  static std::unique_ptr<Checkpoint> open(const std::string& dir);
  const TensorView* find(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t num_tensors() const { return index_.size(); }
  size_t num_files() const { return files_.size(); }

 private:
  void open_indexed(const std::string& dir, const std::string& index_path);
  // Adds every tensor of file not yet in index_ unless skip holds it; a name already
  // taken by another file is an error.
  void add_unclaimed(const SafetensorsFile& file, const std::map<std::string, std::string>& skip);
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

// A tensor to write: raw little-endian bytes (bytes.size() must equal numel * dtype_size).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
// Writes tensors in the given order with contiguous offsets; the header is padded with
// spaces to a multiple of 8 bytes so the data section starts 8-byte aligned. Writes path + ".tmp" and renames it over path, so
// readers never see a half-written file. Throws InputError on bad tensors (empty or
// duplicate name, byte count not matching the shape) or when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace deepinfer
