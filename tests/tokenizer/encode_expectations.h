// Reads `e <allow_special> <text hex> <ids>` lines (tools/gen_encode_vectors.py) and
// checks Tokenizer::encode against each.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer::test {

inline std::string unhex(const std::string& hex) {
  std::string out;
  if (hex == "-") return out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

inline std::vector<int64_t> parse_ids(const std::string& list) {
  std::vector<int64_t> ids;
  if (list == "-") return ids;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) ids.push_back(std::stoll(item));
  return ids;
}

// Returns the number of cases checked.
inline int expect_encodes_like_python(const Tokenizer& tok, const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::string line;
  int cases = 0, failures = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind, text, ids;
    int allow = 0;
    ls >> kind >> allow >> text >> ids;
    EXPECT_EQ(kind, "e");
    const std::string input = unhex(text);
    const auto got = tok.encode(input, allow != 0);
    if (got != parse_ids(ids) && ++failures <= 5) {
      ADD_FAILURE() << "allow_special " << allow << " text hex " << text.substr(0, 400) << "\n expected "
                    << ids.substr(0, 400);
    }
    // Encoding again gives the same ids (the per-thread word cache is transparent).
    if (cases % 7 == 0) {
      EXPECT_EQ(tok.encode(input, allow != 0), got);
    }
    ++cases;
  }
  EXPECT_EQ(failures, 0);
  return cases;
}

}  // namespace deepinfer::test
