// `deepinfer chat`: an interactive multi-turn REPL. Each turn renders the whole
// conversation with the V4.1 prompt encoding, generates through the engine (prefix
// caching makes the earlier turns cheap) and streams the reply, parsed into reasoning
// and content. Commands: /reset, /think on|off, /exit.
#include <iostream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/check.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::cli {

int cmd_chat(int argc, char** argv) {
  std::set<std::string> flags = {"model", "max-num-seqs", "max-num-batched-tokens", "cache-blocks", "block-size",
                                 "swa-replay", "prefix-cache", "seed", "max-model-len", "async-scheduling", "max-tokens", "temperature",
                                 "system", "thinking", "reasoning-effort"};
  Args a(argc, argv, 2, flags);
  EngineOptions opts = engine_options_from(a);
  auto engine = Engine::create(opts);
  ChatOptions chat;
  chat.thinking = a.get("thinking", "off") == "on";
  chat.reasoning_effort = a.get("reasoning-effort", "high");
  const int64_t max_tokens = a.get_int("max-tokens", 512, 1, 1 << 20);
  const float temperature = a.has("temperature") ? std::stof(a.get("temperature")) : 0.7f;
  std::vector<ChatMessage> messages;
  if (a.has("system")) messages.push_back({"system", a.get("system"), "", {}, "", ""});
  std::cerr << "deepinfer chat on " << engine->model_name() << " (/reset, /think on|off, /exit)\n";
  std::string line;
  while (std::cout << "> " << std::flush, std::getline(std::cin, line)) {
    if (line == "/exit") break;
    if (line == "/reset") {
      messages.resize(a.has("system") ? 1 : 0);
      continue;
    }
    if (line == "/think on" || line == "/think off") {
      chat.thinking = line == "/think on";
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({"user", line, "", {}, "", ""});
    try {
      GenerateRequest req;
      req.prompt_ids = engine->tokenize(encode_chat(messages, chat));
      req.params.max_tokens = max_tokens;
      req.params.temperature = temperature;
      engine->add_request(req);
      OutputParser parser(chat.thinking, /*tools=*/false);
      ChatMessage reply{"assistant", "", "", {}, "", ""};
      auto show = [&](const OutputParser::Delta& d) {
        if (!d.reasoning_content.empty()) std::cout << "\x1b[2m" << d.reasoning_content << "\x1b[0m";
        std::cout << d.content << std::flush;
        reply.reasoning_content += d.reasoning_content;
        reply.content += d.content;
      };
      while (engine->has_unfinished())
        for (const RequestOutput& o : engine->step()) show(parser.feed(o.text_delta));
      show(parser.finish());
      std::cout << "\n";
      messages.push_back(reply);
    } catch (const InputError& e) {
      std::cerr << "deepinfer: error: " << e.what() << "\n";
      messages.pop_back();
    }
  }
  return 0;
}

}  // namespace deepinfer::cli
