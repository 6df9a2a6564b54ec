// The `deepinfer` command. Each subcommand is a function; user errors print one
// line ("deepinfer: error: ...") and exit with status 2.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/eval_ppl_cmd.h"
#include "cli/serve_cmd.h"
#include "cli/structured_cmd.h"
#include "cli/tokenize_cmd.h"
#include "common/check.h"
#include "io/safetensors.h"
#include "runtime/runner.h"

namespace deepinfer::cli {
namespace {

const char* kUsage =
    "usage: deepinfer <command> [flags]\n"
    "commands:\n"
    "  logits    --model DIR --tokens 1,2,3 [--chunk N | --prefill P] --out FILE [--device cpu|cuda]\n"
    "            [--engram-tables auto|device|host] [--activations f32|bf16|fp8] [--bf16-weights off|on|auto]\n"
    "            every position's logits as a safetensors file (F32 tensor 'logits' [T, vocab]);\n"
    "            --chunk N feeds N tokens per call, --prefill P feeds P at once then one at a time\n"
    "  generate  [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3 | --input IN.jsonl [--output OUT.jsonl])\n"
    "            [--max-tokens N --temperature T --top-p P --top-k K --min-p M --stop S --request-seed N\n"
    "             --ignore-eos true --json true] [engine flags: --max-num-seqs --max-num-batched-tokens\n"
    "             --cache-blocks --block-size --swa-replay N --prefix-cache on|off --seed N\n"
    "             --device cpu|cuda --batch-invariant on|off --cuda-graphs on|off\n"
    "             --complete-within-max-tokens on|off --engram-tables auto|device|host\n"
    "             --activations f32|bf16|fp8 --bf16-weights off|on|auto]\n"
    "            (--bf16-weights: cuda + bf16 activations: bf16 copies of the dense FP8 / FP4 weights made\n"
    "             once at load for the large-batch GEMMs, same results, ~2x the dense FP8 bytes: ~12 GB per GPU\n"
    "             for V4.1-Flash; auto: on when the KV pool still gets its blocks)\n"
    "            offline batch generation through the scheduler; without --model, the embedded default\n"
    "  chat      [--model DIR] [--thinking on|off] [--system TEXT] [--max-tokens N] [--temperature T]\n"
    "            interactive multi-turn chat with the V4.1 prompt encoding\n"
    "  serve     [--model DIR] [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--served-model-name NAME]\n"
    "            OpenAI-compatible HTTP server (see serve --help)\n"
    "  eval-ppl  --model DIR --text FILE [--context N=512] [--stride N=context] [--batch N=4]\n"
    "            perplexity of a text file, as JSON\n"
    "  tokenize  --tokenizer FILE | --model DIR [--decode]   JSON lines on stdin -> ids / text\n"
    "  structured check --jsonl FILE   compile constraints and check instances\n"
    "  help      this text\n";

// Runs the tokens through one sequence (slot 0) in calls of the given sizes.
std::vector<float> run_feeding(runtime::ModelRunner& model, const std::vector<int64_t>& tokens, int64_t chunk,
                               int64_t prefill, int64_t block_size) {
  std::vector<int64_t> table(size_t((int64_t(tokens.size()) + block_size - 1) / block_size));
  for (size_t b = 0; b < table.size(); ++b) table[b] = int64_t(b);
  model.reset_slot(0, 0, 0, {});
  std::vector<float> logits;
  size_t i = 0;
  while (i < tokens.size()) {
    size_t step = tokens.size() - i;
    if (chunk > 0) step = std::min<size_t>(step, chunk);
    if (prefill >= 0) step = (i == 0 && prefill > 0) ? std::min<size_t>(step, prefill) : 1;
    std::vector<int64_t> part(tokens.begin() + i, tokens.begin() + i + step);
    std::vector<runtime::RunItem> items(1);
    items[0].blocks = &table;
    items[0].tokens = std::move(part);
    items[0].all_logits = true;
    std::vector<float> l = model.forward(items);
    logits.insert(logits.end(), l.begin(), l.end());
    i += step;
  }
  return logits;
}

int cmd_logits(int argc, char** argv) {
  Args a(argc, argv, 2, {"model", "tokens", "chunk", "prefill", "out", "device", "engram-tables", "activations",
                           "bf16-weights"});
  DI_CHECK_INPUT(!(a.has("chunk") && a.has("prefill")), "--chunk and --prefill are mutually exclusive");
  auto tokens = parse_id_list(a.require("tokens"), "--tokens");
  const int64_t chunk = a.get_int("chunk", 0, 1, 1 << 30);
  const int64_t prefill = a.get_int("prefill", -1, 0, 1 << 30);
  const std::string out = a.require("out");
  DI_CHECK_INPUT(!tokens.empty(), "--tokens is empty");
  runtime::RunnerOptions ro;
  ro.device = a.get("device", "cpu");
  ro.engram_tables = a.get("engram-tables", "auto");
  runtime::check_engram_tables(ro.engram_tables, "--engram-tables");
  ro.activations = a.get("activations", "f32");
  runtime::parse_activations(ro.activations, "--activations");
  ro.bf16_weights = a.get("bf16-weights", "off");
  runtime::check_bf16_weights_for(ro.bf16_weights, ro.activations, "--bf16-weights");
  ro.max_num_seqs = 1;
  ro.max_num_batched_tokens = int64_t(tokens.size());
  ro.block_size = 64;
  ro.num_blocks = (int64_t(tokens.size()) + ro.block_size - 1) / ro.block_size;
  auto model = runtime::create_runner(a.require("model"), ro);
  std::vector<float> logits = run_feeding(*model, tokens, chunk, prefill, ro.block_size);
  TensorToWrite t{"logits", DType::F32, {int64_t(tokens.size()), model->config().vocab_size}, {}};
  t.bytes.resize(logits.size() * sizeof(float));
  std::memcpy(t.bytes.data(), logits.data(), t.bytes.size());
  write_safetensors(out, {t});
  return 0;
}

}  // namespace

std::string default_model_dir() {
  if (const char* env = std::getenv("DEEPINFER_MODEL")) return env;
  return DEEPINFER_DEFAULT_MODEL;
}

}  // namespace deepinfer::cli

int main(int argc, char** argv) {
  using namespace deepinfer;
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help")) {
    std::fputs(cli::kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  try {
    std::string cmd = argv[1];
    if (cmd == "logits") return cli::cmd_logits(argc, argv);
    if (cmd == "generate") return cli::cmd_generate(argc, argv);
    if (cmd == "chat") return cli::cmd_chat(argc, argv);
    if (cmd == "serve") return cli::cmd_serve(argc, argv);
    if (cmd == "eval-ppl") return cli::cmd_eval_ppl(argc, argv);
    if (cmd == "tokenize") return cli::cmd_tokenize(argc, argv);
    if (cmd == "structured") return cli::cmd_structured(argc, argv);
    std::fprintf(stderr, "deepinfer: error: unknown command '%s'\n%s", cmd.c_str(), cli::kUsage);
    return 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "deepinfer: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "deepinfer: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {  // e.g. a CUDA failure: reported, not a crash
    std::fprintf(stderr, "deepinfer: error: %s\n", e.what());
    return 1;
  }
}
