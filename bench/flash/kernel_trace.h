// A kernel timeline of a few decode steps through CUPTI's activity API (flash_layers --trace-csv).
//
// Why: a batch-1 decode step is one CUDA graph whose layers run kernels on three streams at once
// (NOTES 33-34); the layer events give per-layer totals and ncu times kernels alone and
// serialized, so neither shows the critical path or the idle time between its kernels. nsys is
// not on the GPU machine, but the toolkit's libcupti is (packed next to flash_layers): its
// concurrent-kernel records carry each kernel's start / end on the device clock, its stream and
// its graph node. bench/flash/timeline.py reads the CSV.
//
// libcupti is opened with dlopen only when the flag is given, so flash_layers and the tests link
// nothing new and run where no CUPTI exists. The record layouts come from the toolkit's header
// (CUpti_ActivityKernel10, CUpti_ActivityMemcpy6, CUpti_ActivityMemset4 for CUPTI API 13.0.1):
// open() warns when the library's API version differs from the header's (a different CUPTI may
// lay its records out differently); pack_all.sh packs the header's own library.
//
// CONCURRENT_KERNEL (not KERNEL, which serializes every launch) keeps the streams' overlap as it
// is. Tracing is enabled before the traced mode's first step, so its graphs are instantiated
// with CUPTI attached (their kernel nodes then report records); mark() stamps the host's view of
// each step on the same clock (cuptiGetTimestamp), which is how the reader splits the replays.
#pragma once

#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace ktrace {

struct Row {
  const char* kind;  // kernel, memcpy, memset, mark
  uint64_t start = 0, end = 0;
  uint32_t stream = 0, graph_id = 0, corr = 0, channel = 0, channel_type = 0;
  uint64_t node = 0;
  int grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, cluster[3] = {0, 0, 0};
  int regs = 0, smem_static = 0, smem_dyn = 0;
  uint64_t bytes = 0;
  std::string name;  // kernel: its mangled name; memcpy: the copy kind; mark: the label
};

class Tracer {
 public:
  // Loads libcupti (libcupti.so.13, then libcupti.so). Returns false with a one-line reason in err.
  bool open(std::string& err) {
    const char* libs[] = {"libcupti.so.13", "libcupti.so"};
    for (const char* l : libs)
      if ((lib_ = dlopen(l, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib_ == nullptr) {
      const char* e = dlerror();
      err = std::string("cannot load libcupti.so.13 (") + (e ? e : "?") + "); put it on LD_LIBRARY_PATH";
      return false;
    }
#define KT_SYM(f)                                                           \
  if ((f##_ = reinterpret_cast<decltype(&::f)>(dlsym(lib_, #f))) == nullptr) { \
    err = "libcupti lacks " #f;                                             \
    return false;                                                           \
  }
    KT_SYM(cuptiGetVersion)
    KT_SYM(cuptiGetResultString)
    KT_SYM(cuptiActivityRegisterCallbacks)
    KT_SYM(cuptiActivityEnable)
    KT_SYM(cuptiActivityDisable)
    KT_SYM(cuptiActivityFlushAll)
    KT_SYM(cuptiActivityGetNextRecord)
    KT_SYM(cuptiActivityGetNumDroppedRecords)
    KT_SYM(cuptiGetTimestamp)
#undef KT_SYM
    uint32_t version = 0;
    cuptiGetVersion_(&version);
    if (version != CUPTI_API_VERSION)  // warn only: the packed library is the header's
      std::fprintf(stderr, "trace: libcupti API version %u, the header's %u (record layouts may differ)\n", version,
                   unsigned(CUPTI_API_VERSION));
    return true;
  }

  // Starts recording kernels, copies and sets (after open()).
  bool start(std::string& err) {
    self() = this;
    if (!ok(cuptiActivityRegisterCallbacks_(&Tracer::requested, &Tracer::completed), "register callbacks", err))
      return false;
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                 CUPTI_ACTIVITY_KIND_MEMSET})
      if (!ok(cuptiActivityEnable_(k), "enable", err)) return false;
    return true;
  }

  // A host-side instant on the records' clock: a row of kind "mark" named label.
  void mark(const std::string& label) {
    Row r;
    r.kind = "mark";
    cuptiGetTimestamp_(&r.start);
    r.end = r.start;
    r.name = label;
    std::lock_guard<std::mutex> g(mu_);
    rows_.push_back(std::move(r));
  }

  // Stops recording and drains CUPTI's buffers (call after the traced work has synchronized).
  void stop() {
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                 CUPTI_ACTIVITY_KIND_MEMSET})
      cuptiActivityDisable_(k);
    cuptiActivityFlushAll_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }

  // One row per record, sorted by start: kind,start_ns,end_ns,stream,graph_id,graph_node,grid,
  // block,cluster,regs,smem_static,smem_dyn,bytes,corr,channel,channel_type,name (name demangled,
  // without its parameter list and namespaces, quoted). A graph's kernels may all report the
  // stream it was launched into; the hardware channel (channelID) tells its branches apart.
  bool write_csv(const std::string& path, std::string& err) {
    std::lock_guard<std::mutex> g(mu_);
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      err = "cannot write " + path;
      return false;
    }
    std::vector<const Row*> order;
    for (const auto& r : rows_) order.push_back(&r);
    std::stable_sort(order.begin(), order.end(), [](const Row* a, const Row* b) { return a->start < b->start; });
    std::fprintf(f, "kind,start_ns,end_ns,stream,graph_id,graph_node,grid,block,cluster,regs,smem_static,smem_dyn,"
                    "bytes,corr,channel,channel_type,name\n");
    for (const Row* r : order) {
      std::string n = std::strcmp(r->kind, "kernel") == 0 ? shorten(r->name) : r->name;
      for (auto& c : n)
        if (c == '"') c = '\'';
      std::fprintf(f, "%s,%llu,%llu,%u,%u,%llu,%d.%d.%d,%d.%d.%d,%d.%d.%d,%d,%d,%d,%llu,%u,%u,%u,\"%s\"\n", r->kind,
                   (unsigned long long)r->start, (unsigned long long)r->end, r->stream, r->graph_id,
                   (unsigned long long)r->node, r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1],
                   r->block[2], r->cluster[0], r->cluster[1], r->cluster[2], r->regs, r->smem_static, r->smem_dyn,
                   (unsigned long long)r->bytes, r->corr, r->channel, r->channel_type, n.c_str());
    }
    std::fclose(f);
    return true;
  }

  size_t kernels() const {
    size_t n = 0;
    for (const auto& r : rows_) n += std::strcmp(r.kind, "kernel") == 0;
    return n;
  }
  size_t dropped() const { return dropped_; }

 private:
  static Tracer*& self() {
    static Tracer* t = nullptr;
    return t;
  }
  bool ok(CUptiResult r, const char* what, std::string& err) {
    if (r == CUPTI_SUCCESS) return true;
    const char* s = nullptr;
    cuptiGetResultString_(r, &s);
    err = std::string("cupti ") + what + ": " + (s ? s : "?");
    return false;
  }

  // CUPTI asks for buffers from its own threads; 8 MB holds tens of thousands of records.
  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    constexpr size_t kBytes = size_t(8) << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
    *size = kBytes;
    *max_records = 0;
  }
  // The fields every record kind has (kernel, memcpy, memset: the same names in each struct).
  template <class Rec>
  static void timing(Row& r, const Rec* m) {
    r.start = m->start;
    r.end = m->end;
    r.stream = m->streamId;
    r.graph_id = m->graphId;
    r.node = m->graphNodeId;
    r.corr = m->correlationId;
  }
  static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
    Tracer* t = self();
    CUpti_Activity* rec = nullptr;
    std::vector<Row> got;
    while (t->cuptiActivityGetNextRecord_(buffer, valid, &rec) == CUPTI_SUCCESS) {
      Row r;
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        r.kind = "kernel";
        timing(r, k);
        r.channel = k->channelID;
        r.channel_type = uint32_t(k->channelType);
        r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
        r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
        r.cluster[0] = int(k->clusterX), r.cluster[1] = int(k->clusterY), r.cluster[2] = int(k->clusterZ);
        r.regs = k->registersPerThread;
        r.smem_static = k->staticSharedMemory;
        r.smem_dyn = k->dynamicSharedMemory;
        r.name = k->name ? k->name : "?";
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        static const char* const kKinds[] = {"memcpy_?", "memcpy_HtoD", "memcpy_DtoH", "memcpy_HtoA", "memcpy_AtoH",
                                             "memcpy_AtoA", "memcpy_AtoD", "memcpy_DtoA", "memcpy_DtoD",
                                             "memcpy_HtoH", "memcpy_PtoP"};
        r.kind = "memcpy";
        timing(r, m);
        r.bytes = m->bytes;
        r.channel = m->channelID;
        r.channel_type = uint32_t(m->channelType);
        r.name = m->copyKind < 11 ? kKinds[m->copyKind] : "memcpy_?";
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        r.kind = "memset";
        timing(r, m);
        r.bytes = m->bytes;
        r.name = "memset";
      } else {
        continue;
      }
      got.push_back(std::move(r));
    }
    size_t dropped = 0;
    t->cuptiActivityGetNumDroppedRecords_(ctx, stream, &dropped);
    std::free(buffer);
    std::lock_guard<std::mutex> g(t->mu_);
    t->dropped_ += dropped;
    for (auto& r : got) t->rows_.push_back(std::move(r));
  }

  // "void ns::(anonymous namespace)::kern<A, B>(int, float*)" -> "kern<A, B>": the qualifiers and
  // parameter list say nothing the template arguments do not; namespaces inside the arguments go
  // too. (The first version cut at the first '(' outside template brackets, which is the one of
  // "(anonymous namespace)", and so wrote every kernel of an anonymous namespace as "".)
 public:
  static std::string shorten(const std::string& mangled) {
    int status = 0;
    char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    std::string s = (status == 0 && d) ? d : mangled;
    std::free(d);
    for (size_t p; (p = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(p, 23);
    // cut the parameter list: the '(' that matches the final ')'
    if (!s.empty() && s.back() == ')') {
      int depth = 0;
      for (size_t i = s.size(); i-- > 0;) {
        if (s[i] == ')') ++depth;
        else if (s[i] == '(' && --depth == 0) {
          s.resize(i);
          break;
        }
      }
    }
    if (s.rfind("void ", 0) == 0) s = s.substr(5);
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      // drop "word::" prefixes
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j > i && j + 1 < s.size() && s[j] == ':' && s[j + 1] == ':') {
        i = j + 1;
        continue;
      }
      if (j > i) {
        out.append(s, i, j - i);
        i = j - 1;
      } else {
        out.push_back(s[i]);
      }
    }
    if (out.empty()) out = mangled;  // never an empty name
    if (out.size() > 200) out.resize(200);
    return out;
  }

 private:
  void* lib_ = nullptr;
  std::mutex mu_;
  std::vector<Row> rows_;
  size_t dropped_ = 0;
  decltype(&::cuptiGetVersion) cuptiGetVersion_ = nullptr;
  decltype(&::cuptiGetResultString) cuptiGetResultString_ = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) cuptiActivityRegisterCallbacks_ = nullptr;
  decltype(&::cuptiActivityEnable) cuptiActivityEnable_ = nullptr;
  decltype(&::cuptiActivityDisable) cuptiActivityDisable_ = nullptr;
  decltype(&::cuptiActivityFlushAll) cuptiActivityFlushAll_ = nullptr;
  decltype(&::cuptiActivityGetNextRecord) cuptiActivityGetNextRecord_ = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) cuptiActivityGetNumDroppedRecords_ = nullptr;
  decltype(&::cuptiGetTimestamp) cuptiGetTimestamp_ = nullptr;
};

}  // namespace ktrace
