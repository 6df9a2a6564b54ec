#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "common/check.h"

namespace deepinfer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The largest released shards carry a few MB of header; anything past this is corrupt or
// hostile and would only make us allocate.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// A valid header nests three deep (root, tensor entry, shape). The limit stops hostile
// input from building deep trees while leaving room for extension fields.
constexpr int kMaxJsonDepth = 32;
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "F32", 4},         {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
    {DType::F64, "F64", 8},         {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::F8_E8M0, "F8_E8M0", 1}, {DType::I8, "I8", 1},           {DType::U8, "U8", 1},
    {DType::I16, "I16", 2},         {DType::I32, "I32", 4},         {DType::I64, "I64", 8},
    {DType::BOOL, "BOOL", 1},
};

const DTypeInfo* find_dtype(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == t) return info;
  }
  DI_CHECK(false, "unknown DType ", static_cast<int>(t));
  __builtin_unreachable();
}

// Thrown out of the parser callback; parse_json turns it into an InputError.
struct JsonRejected {
  std::string why;
};

// Parses JSON, rejecting duplicate keys (nlohmann would silently keep the last one, so two
// files could disagree on which tensor a name means) and absurd nesting.
json parse_json(const char* begin, const char* end, const std::string& label) {
  std::vector<std::set<std::string>> keys_per_object;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) throw JsonRejected{str_cat("nesting deeper than ", kMaxJsonDepth)};
    if (event == json::parse_event_t::object_start) {
      keys_per_object.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys_per_object.empty()) keys_per_object.pop_back();
    } else if (event == json::parse_event_t::key && !keys_per_object.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys_per_object.back().insert(key).second) throw JsonRejected{str_cat("duplicate key ", quoted(key))};
    }
    return true;
  };
  try {
    return json::parse(begin, end, callback, /*allow_exceptions=*/true);
  } catch (const JsonRejected& e) {
    throw InputError(str_cat(label, ": header JSON rejected: ", e.why));
  } catch (const json::exception& e) {
    throw InputError(str_cat(label, ": header is not valid JSON: ", e.what()));
  }
}

// A short one-line rendering of a JSON value for error messages; hostile values may be
// huge or hold control characters and invalid UTF-8.
std::string brief(const json& j) {
  std::string s = j.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  constexpr size_t kMax = 120;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

// A name from hostile input, quoted and escaped for an error message.
std::string quoted(const std::string& name) { return brief(json(name)); }

bool get_non_negative(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

// A file name from an index must name a file directly inside the checkpoint directory.
bool is_plain_file_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s) {
    if (c == '/' || c == '\\' || c == '\0') return false;
  }
  return true;
}

struct Extent {
  uint64_t begin;
  uint64_t end;
  const std::string* name;
};

}  // namespace

size_t dtype_size(DType t) { return dtype_info(t).size; }
const char* dtype_name(DType t) { return dtype_info(t).name; }

int64_t TensorView::numel() const {
  // A zero dimension ends the product early: parse() accepts shapes like [2^40, 2^40, 0],
  // whose running product would otherwise overflow before reaching the zero.
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    n *= static_cast<uint64_t>(d);
  }
  return static_cast<int64_t>(n);
}

std::string TensorView::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// ---------------------------------------------------------------------------------------
// SafetensorsFile
// ---------------------------------------------------------------------------------------

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DI_CHECK_INPUT(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(str_cat(path, ": not a regular file"));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile);
  file->size_ = static_cast<size_t>(st.st_size);
  // mmap rejects zero lengths; a file that short fails parse() with a clear message anyway.
  if (file->size_ >= 8) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    DI_CHECK_INPUT(p != MAP_FAILED, path, ": cannot mmap: ", std::strerror(err));
    file->mapping_ = p;
    file->base_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
  file->parse(path);
  return file;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::from_buffer(const uint8_t* data, size_t size,
                                                              const std::string& label) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile);
  file->base_ = data;
  file->size_ = data ? size : 0;
  file->parse(label);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsFile::parse(const std::string& label) {
  label_ = label;
  DI_CHECK_INPUT(size_ >= 8, label, ": file is ", size_, " bytes, too short for the 8-byte safetensors header length");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | base_[i];
  DI_CHECK_INPUT(header_bytes <= kMaxHeaderBytes, label, ": header length ", header_bytes,
                 " is absurd (limit ", kMaxHeaderBytes, " bytes)");
  DI_CHECK_INPUT(header_bytes <= size_ - 8, label, ": header length ", header_bytes,
                 " runs past the end of the file (", size_, " bytes)");
  const char* text = reinterpret_cast<const char*>(base_ + 8);
  json header = parse_json(text, text + header_bytes, label);
  DI_CHECK_INPUT(header.is_object(), label, ": header must be a JSON object, got ", header.type_name());

  const uint8_t* data_start = base_ + 8 + header_bytes;
  const uint64_t data_bytes = size_ - 8 - header_bytes;
  std::vector<Extent> extents;
  for (const auto& item : header.items()) {
    // Plain references rather than structured bindings: clang 14 cannot capture those.
    const std::string& name = item.key();
    const json& entry = item.value();
    if (name == kMetadataKey) {
      DI_CHECK_INPUT(entry.is_object(), label, ": __metadata__ must be an object, got ", entry.type_name());
      for (auto& [key, value] : entry.items()) {
        DI_CHECK_INPUT(value.is_string(), label, ": __metadata__ value of ", quoted(key), " must be a string, got ",
                       value.type_name());
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    auto fail = [&](const auto&... why) { throw InputError(str_cat(label, ": tensor ", quoted(name), ": ", why...)); };
    if (name.empty()) fail("tensor names must not be empty");
    if (!entry.is_object()) fail("entry must be an object, got ", entry.type_name());

    TensorView view;
    view.name = name;
    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) fail("missing string field 'dtype'");
    const DTypeInfo* info = find_dtype(dtype_it->get_ref<const std::string&>());
    if (!info) fail("unknown dtype ", brief(*dtype_it));
    view.dtype = info->dtype;

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array()) fail("missing array field 'shape'");
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : *shape_it) {
      uint64_t dim = 0;
      if (!get_non_negative(d, &dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail("shape must be an array of non-negative integers, got ", brief(*shape_it));
      }
      view.shape.push_back(static_cast<int64_t>(dim));
      overflow = overflow || __builtin_mul_overflow(numel, dim, &numel);
    }
    // A zero dimension makes the tensor empty however large the others are.
    if (std::find(view.shape.begin(), view.shape.end(), 0) != view.shape.end()) {
      numel = 0;
      overflow = false;
    }
    uint64_t nbytes = 0;
    if (overflow || numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, info->size, &nbytes)) {
      fail("shape ", view.shape_str(), " overflows: its element or byte count does not fit in int64");
    }

    auto offsets_it = entry.find("data_offsets");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      fail("missing field 'data_offsets' = [begin, end]");
    }
    uint64_t begin = 0, end = 0;
    if (!get_non_negative((*offsets_it)[0], &begin) || !get_non_negative((*offsets_it)[1], &end)) {
      fail("data_offsets must be two non-negative integers, got ", brief(*offsets_it));
    }
    if (begin > end) fail("data_offsets [", begin, ", ", end, "] are reversed (begin > end)");
    if (end > data_bytes) {
      fail("data_offsets end ", end, " is past the end of the data section (", data_bytes, " bytes)");
    }
    if (end - begin != nbytes) {
      fail("data_offsets span ", end - begin, " bytes but dtype ", info->name, " shape ", view.shape_str(),
           " needs ", nbytes, " bytes (size mismatch)");
    }
    view.data = data_start + begin;
    view.nbytes = static_cast<size_t>(nbytes);
    auto [it, inserted] = tensors_.emplace(name, std::move(view));
    if (nbytes > 0) extents.push_back({begin, end, &it->first});
  }

  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i) {
    DI_CHECK_INPUT(extents[i].begin >= extents[i - 1].end, label, ": tensor ", quoted(*extents[i].name),
                   " overlaps tensor ", quoted(*extents[i - 1].name), " in the data section");
  }
}

// ---------------------------------------------------------------------------------------
// Checkpoint
// ---------------------------------------------------------------------------------------

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& dir) {
  auto ckpt = std::make_unique<Checkpoint>();
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  DI_CHECK_INPUT(st.type() != fs::file_type::not_found, dir, ": no such file or directory");
  DI_CHECK_INPUT(!ec, dir, ": cannot stat: ", ec.message());
  if (fs::is_regular_file(st)) {
    ckpt->files_.push_back(SafetensorsFile::open(dir));
    ckpt->add_unclaimed(*ckpt->files_.back(), {});
    return ckpt;
  }
  DI_CHECK_INPUT(fs::is_directory(st), dir, ": neither a file nor a directory");

  const fs::path root(dir);
  if (fs::exists(root / kIndexName, ec)) {
    ckpt->open_indexed(dir, (root / kIndexName).string());
    return ckpt;
  }
  if (fs::exists(root / kSingleName, ec)) {
    ckpt->files_.push_back(SafetensorsFile::open((root / kSingleName).string()));
    ckpt->add_unclaimed(*ckpt->files_.back(), {});
    return ckpt;
  }

  std::vector<std::string> shards;
  fs::directory_iterator it(root, ec);
  DI_CHECK_INPUT(!ec, dir, ": cannot list directory: ", ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code file_ec;
    if (p.extension() == ".safetensors" && fs::is_regular_file(p, file_ec)) shards.push_back(p.string());
  }
  DI_CHECK_INPUT(!ec, dir, ": cannot list directory: ", ec.message());
  DI_CHECK_INPUT(!shards.empty(), "no safetensors weights in ", dir);
  std::sort(shards.begin(), shards.end());  // deterministic file order and error messages
  for (const std::string& shard : shards) {
    ckpt->files_.push_back(SafetensorsFile::open(shard));
    ckpt->add_unclaimed(*ckpt->files_.back(), {});
  }
  return ckpt;
}

void Checkpoint::open_indexed(const std::string& dir, const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  DI_CHECK_INPUT(in, index_path, ": cannot open");
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    DI_CHECK_INPUT(text.size() <= kMaxHeaderBytes, index_path, ": larger than ", kMaxHeaderBytes, " bytes");
  }
  json index = parse_json(text.data(), text.data() + text.size(), index_path);
  DI_CHECK_INPUT(index.is_object(), index_path, ": must be a JSON object, got ", index.type_name());
  auto map_it = index.find("weight_map");
  DI_CHECK_INPUT(map_it != index.end() && map_it->is_object(), index_path,
                 ": missing object field 'weight_map'");
  DI_CHECK_INPUT(!map_it->empty(), index_path, ": weight_map is empty, so the checkpoint has no weights");

  std::map<std::string, std::string> weight_map;
  std::map<std::string, size_t> shard_file;  // shard name -> files_ slot
  for (auto& [name, shard] : map_it->items()) {
    DI_CHECK_INPUT(shard.is_string(), index_path, ": weight_map[", quoted(name), "] must be a file name string, got ",
                   shard.type_name());
    const std::string& shard_name = shard.get_ref<const std::string&>();
    DI_CHECK_INPUT(is_plain_file_name(shard_name), index_path, ": weight_map[", quoted(name), "] names shard ",
                   brief(shard), ", which is not a plain file name inside ", dir);
    weight_map[name] = shard_name;
    if (shard_file.count(shard_name)) continue;
    const fs::path shard_path = fs::path(dir) / shard_name;
    std::error_code ec;
    DI_CHECK_INPUT(fs::exists(shard_path, ec), index_path, ": shard ", quoted(shard_name), " (holding tensor ",
                   quoted(name), ") does not exist");
    shard_file[shard_name] = files_.size();
    files_.push_back(SafetensorsFile::open(shard_path.string()));
  }
  for (const auto& [name, shard_name] : weight_map) {
    const TensorView* view = files_[shard_file[shard_name]]->find(name);
    DI_CHECK_INPUT(view, index_path, ": tensor ", quoted(name), " is mapped to shard ", quoted(shard_name),
                   " but that shard does not hold it");
    index_[name] = view;
  }
  for (const auto& file : files_) add_unclaimed(*file, weight_map);
}

void Checkpoint::add_unclaimed(const SafetensorsFile& file, const std::map<std::string, std::string>& skip) {
  for (const auto& [name, view] : file.tensors()) {
    if (skip.count(name)) continue;
    auto [it, inserted] = index_.emplace(name, &view);
    if (!inserted) {
      std::string other = "another file";
      for (const auto& f : files_) {
        if (f->find(name) == it->second) other = f->label();
      }
      throw InputError(str_cat("tensor ", quoted(name), " appears in both ", other, " and ", file.label()));
    }
  }
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, view] : index_) out.push_back(name);
  return out;
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    DI_CHECK_INPUT(!t.name.empty() && t.name != kMetadataKey, path, ": cannot write a tensor named ", quoted(t.name));
    DI_CHECK_INPUT(seen.insert(t.name).second, path, ": tensor ", quoted(t.name), " is given twice");
    TensorView view;
    view.shape = t.shape;
    uint64_t numel = 1;
    bool overflow = false;
    for (int64_t d : t.shape) {
      DI_CHECK_INPUT(d >= 0, path, ": tensor ", quoted(t.name), " has a negative dimension in shape ",
                     view.shape_str());
      overflow = overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel);
    }
    uint64_t nbytes = 0;
    overflow = overflow || __builtin_mul_overflow(numel, dtype_size(t.dtype), &nbytes);
    DI_CHECK_INPUT(!overflow && nbytes == t.bytes.size(), path, ": tensor ", quoted(t.name), " has ",
                   t.bytes.size(), " bytes but dtype ", dtype_name(t.dtype), " shape ", view.shape_str(),
                   " needs ", overflow ? std::string("more than 2^64") : std::to_string(nbytes));
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    throw InputError(str_cat(path, ": cannot encode header: ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  DI_CHECK_INPUT(f, tmp, ": cannot create: ", std::strerror(errno));
  bool ok = std::fwrite(length, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const TensorToWrite& t : tensors) {
    if (!ok) break;
    ok = t.bytes.empty() || std::fwrite(t.bytes.data(), 1, t.bytes.size(), f) == t.bytes.size();
  }
  ok = ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ok = false;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    throw InputError(str_cat(path, ": cannot write: ", std::strerror(err)));
  }
}

}  // namespace deepinfer
