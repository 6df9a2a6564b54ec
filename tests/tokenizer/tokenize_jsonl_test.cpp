// The `deepinfer tokenize` line protocol (tokenize_jsonl.h).
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tokenizer/tokenize_jsonl.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

std::string fixture(const std::string& name) { return std::string(DEEPINFER_FIXTURES) + "/tokenizer/" + name; }

struct JsonlRun {
  int bad;
  std::string out, err;
};

JsonlRun run(const Tokenizer& tok, bool decode, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out, err;
  const int bad = tokenize_jsonl(tok, decode, in, out, err);
  return {bad, out.str(), err.str()};
}

TEST(TokenizeJsonl, EncodesAndDecodes) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  const auto ids = tok->encode("<｜User｜>Hello 日本");
  std::string list;
  for (int64_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  const JsonlRun e = run(*tok, false, "{\"text\": \"<｜User｜>Hello 日本\"}\n\n{\"text\": \"\"}\n");
  EXPECT_EQ(e.bad, 0);
  EXPECT_EQ(e.out, "{\"ids\":[" + list + "]}\n{\"ids\":[]}\n");
  const JsonlRun d = run(*tok, true, "{\"ids\": [" + list + "]}\n");
  EXPECT_EQ(d.bad, 0);
  EXPECT_EQ(d.out, "{\"text\":\"<｜User｜>Hello 日本\"}\n");
}

TEST(TokenizeJsonl, BadLinesAreReportedAndSkipped) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  const JsonlRun e = run(*tok, false, "not json\n{\"text\": 3}\n[1]\n{\"text\": \"ok\"}\n{\"text\": \"\\ud800\"}\n");
  EXPECT_EQ(e.bad, 4);
  std::istringstream lines(e.out);
  std::string line;
  std::vector<std::string> out;
  while (std::getline(lines, line)) out.push_back(line);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0], "{\"error\":\"line 1: not valid JSON\"}");
  EXPECT_EQ(out[1], "{\"error\":\"line 2: expected a string field \\\"text\\\"\"}");
  EXPECT_EQ(out[3].substr(0, 7), "{\"ids\":");
  EXPECT_NE(out[4].find("line 5"), std::string::npos);
  EXPECT_NE(e.err.find("deepinfer: error: line 3: expected a JSON object"), std::string::npos);

  const JsonlRun d = run(*tok, true, "{\"ids\": [1, -1]}\n{\"ids\": [1.5]}\n{\"ids\": [99999999999999999999]}\n{}\n");
  EXPECT_EQ(d.bad, 4);
  EXPECT_NE(d.out.find("line 1: token id -1 is outside"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
