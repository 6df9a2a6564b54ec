// libFuzzer target: any byte string handed to SafetensorsFile::from_buffer must either
// parse into views that lie inside the buffer or throw InputError. Anything else that
// escapes (another exception, a sanitizer report, an abort) is a bug.
#include <cstddef>
#include <cstdint>

#include "common/check.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = deepinfer::SafetensorsFile::from_buffer(data, size, "fuzz");
    // Touch both ends of every view so ASan flags any view reaching outside the input.
    volatile uint8_t sink = 0;
    for (const auto& [name, view] : file->tensors()) {
      if (view.nbytes > 0) sink = sink ^ view.data[0] ^ view.data[view.nbytes - 1];
      if (view.numel() * static_cast<int64_t>(deepinfer::dtype_size(view.dtype)) != static_cast<int64_t>(view.nbytes)) {
        __builtin_trap();
      }
      (void)view.shape_str();
    }
    (void)sink;
  } catch (const deepinfer::InputError&) {
  }
  return 0;
}
