// `deepinfer tokenize`: tokenizer.json encode / decode over JSON lines.
//
//   deepinfer tokenize (--tokenizer FILE | --model DIR) [--decode] < in.jsonl > out.jsonl
//
// --model DIR reads DIR/tokenizer.json. Without --decode each line {"text": "..."} gives
// {"ids": [...]} (special-token strings such as <｜User｜> are recognised; no BOS is
// added); with --decode each line {"ids": [...]} gives {"text": "..."} (special tokens
// kept). A bad line gives {"error": "line N: reason"} in its place (and the message on
// stderr) and processing continues; the exit status is then 1. Blank lines are skipped.
// Usage errors and an unloadable tokenizer exit with status 2.
#pragma once

namespace deepinfer::cli {

// argv[1] == "tokenize".
int cmd_tokenize(int argc, char** argv);

}  // namespace deepinfer::cli
