#include "common/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace deepinfer {

int64_t host_memory_available() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (f >> key >> kib) {
    std::getline(f, unit);  // " kB"
    if (key == "MemAvailable:") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page : 0;
}

}  // namespace deepinfer
