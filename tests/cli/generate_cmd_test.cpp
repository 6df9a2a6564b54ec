// `deepinfer generate --input` end to end: n > 1 gives one output line per sample, and
// the progress bar appears on stderr only when stderr is a terminal.
#include <gtest/gtest.h>

#include "run_cli.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace deepinfer {
namespace {

const std::string kModel = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_f32";

int run(const std::string& cmd, std::string* out = nullptr) {
  const auto r = testing_cli::run_command(cmd);
  if (out) *out = r.output;
  return r.status;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Files {
  std::string in = ::testing::TempDir() + "/generate_in.jsonl", out = ::testing::TempDir() + "/generate_out.jsonl";
  Files() {
    std::ofstream f(in);
    f << R"({"id": "a", "prompt_ids": [5, 6, 7, 8], "max_tokens": 4, "temperature": 0})" << "\n";
    f << R"({"id": "b", "prompt_ids": [9, 10, 11], "max_tokens": 3, "n": 3, "seed": 4})" << "\n";
    f << R"({"id": "c", "prompt_ids": [12], "max_tokens": 2, "n": 0})" << "\n";
  }
  std::string command() const {
    return std::string(DEEPINFER_BINARY) + " generate --model " + kModel + " --input " + in + " --output " + out;
  }
};

TEST(GenerateCommand, OneLinePerSampleAndNoProgressBarWithoutTerminal) {
  Files f;
  const std::string err = ::testing::TempDir() + "/generate_err.txt";
  ASSERT_EQ(run(f.command() + " 2>" + err), 0);
  EXPECT_EQ(slurp(err), "");  // not a terminal: silent
  std::ifstream out(f.out);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 5u);  // a, b x 3, c (an error)
  EXPECT_EQ(lines[0]["id"], "a");
  EXPECT_FALSE(lines[0].contains("index"));
  EXPECT_EQ(lines[0]["token_ids"].size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[1 + i]["id"], "b");
    EXPECT_EQ(lines[1 + i]["index"], i);
    EXPECT_EQ(lines[1 + i]["token_ids"].size(), 3u);
    EXPECT_EQ(lines[1 + i]["usage"]["prompt_tokens"], 3);
  }
  EXPECT_NE(lines[1]["token_ids"], lines[2]["token_ids"]);
  EXPECT_EQ(lines[4]["id"], "c");
  EXPECT_NE(lines[4]["error"].get<std::string>().find("n must be in [1, 128]"), std::string::npos);
}

// --complete-within-max-tokens on is the default for lines that leave it unset: with
// max_tokens the regex's shortest output (9 bytes), those lines end complete ("stop");
// a line may turn it off; a line whose max_tokens is below the shortest output gets an
// error; a bad flag value fails the command.
TEST(GenerateCommand, CompleteWithinMaxTokensDefault) {
  const std::string in = ::testing::TempDir() + "/generate_budget_in.jsonl";
  const std::string out = ::testing::TempDir() + "/generate_budget_out.jsonl";
  {
    std::ofstream f(in);
    const std::string re = R"J("[a-z]{3,}@[a-z]+\\.(com|org)")J";  // JSON text of the regex
    for (int seed = 0; seed < 4; ++seed)
      f << R"J({"id": "on)J" << seed << R"J(", "prompt": "mail: ", "max_tokens": 9, "temperature": 1.0, "seed": )J"
        << seed << R"J(, "guided_regex": )J" << re << "}\n";
    f << R"J({"id": "short", "prompt": "mail: ", "max_tokens": 8, "guided_regex": )J" << re << "}\n";
    f << R"J({"id": "off", "prompt": "mail: ", "max_tokens": 8, "structured_outputs": {"regex": )J" << re
      << R"J(, "complete_within_max_tokens": false}})J" << "\n";
  }
  const std::string cmd = std::string(DEEPINFER_BINARY) + " generate --model " + kModel + " --input " + in +
                          " --output " + out + " --complete-within-max-tokens on 2>/dev/null";
  ASSERT_EQ(run(cmd), 0);
  std::ifstream f(out);
  std::map<std::string, nlohmann::json> lines;
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    lines[j["id"].get<std::string>()] = j;
  }
  ASSERT_EQ(lines.size(), 6u);
  for (int seed = 0; seed < 4; ++seed) {
    const auto& j = lines["on" + std::to_string(seed)];
    EXPECT_EQ(j["finish_reason"], "stop") << j.dump();
    const std::string text = j["text"].get<std::string>();
    EXPECT_NE(text.find('@'), std::string::npos) << text;
    EXPECT_TRUE(text.size() >= 9 && (text.ends_with(".com") || text.ends_with(".org"))) << text;
  }
  EXPECT_NE(lines["short"]["error"].get<std::string>().find("complete_within_max_tokens"), std::string::npos)
      << lines["short"].dump();
  EXPECT_FALSE(lines["off"].contains("error")) << lines["off"].dump();  // no guarantee asked: runs
  EXPECT_NE(run(std::string(DEEPINFER_BINARY) + " generate --model " + kModel + " --input " + in +
                " --complete-within-max-tokens yes 2>/dev/null"),
            0);
}

TEST(GenerateCommand, ProgressBarOnATerminal) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const std::string slave = ptsname(master);
  Files f;
  // The command's stderr is the terminal; reading the master keeps it from filling up.
  FILE* p = popen((f.command() + " 2>" + slave).c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 256> sink;
  while (fread(sink.data(), 1, sink.size(), p) > 0) {
  }
  const int st = pclose(p);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  fcntl(master, F_SETFL, O_NONBLOCK);
  std::string shown;
  std::array<char, 4096> buf;
  for (ssize_t n; (n = read(master, buf.data(), buf.size())) > 0;) shown.append(buf.data(), size_t(n));
  close(master);
  EXPECT_NE(shown.find("2/2 requests"), std::string::npos) << shown;  // the failed line is not counted
  EXPECT_NE(shown.find("tok/s"), std::string::npos) << shown;
}

}  // namespace
}  // namespace deepinfer
