#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a bounded time
# on a scratch copy of its seed corpus, so the committed corpora stay small:
#   safetensors_fuzz   checkpoint headers           (seeds: tests/fuzz/corpus/safetensors)
#   structured_fuzz    regex / GBNF / JSON Schema   (from an empty corpus)
#   model_files_fuzz   config.json, tokenizer.json, prompt text (seeds: the fixtures)
#   server_fuzz        request bodies through the OpenAI API layer (seeds: tests/fuzz/corpus/server)
#
# Usage: scripts/fuzz.sh [SECONDS]      (per target; default 60)
# Env:   FUZZ_SECONDS (when no argument), FUZZ_BUILD_DIR (default build-fuzz), FUZZ_CORPUS_OUT (keep the grown corpora there),
#        FUZZ_TARGETS (default: all four, space-separated)
# Exits non-zero when a fuzzer reports a crash, sanitizer error, leak, timeout or OOM;
# the reproducer is left in $FUZZ_BUILD_DIR/fuzz-artifacts/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-${FUZZ_SECONDS:-60}}
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=(${FUZZ_TARGETS:-safetensors_fuzz structured_fuzz model_files_fuzz server_fuzz})

generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" \
  -DDEEPINFER_FUZZ=ON -DDEEPINFER_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target "${targets[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

# Seeds for model_files_fuzz: its first byte picks the file kind (0 config.json,
# 1 tokenizer.json, 2 prompt text), so each fixture is prefixed with its selector.
seed_model_files() {
  local out=$1 fx="$root/tests/fixtures" i=0
  mkdir -p "$out"
  { printf '\x00'; cat "$fx/v41_tiny_f32/config.json"; } > "$out/config"
  for f in "$fx"/tokenizer/handmade_*.json "$fx"/tokenizer/bpe_tokenizer.json; do
    { printf '\x01'; cat "$f"; } > "$out/tokenizer_$(basename "$f" .json)"
  done
  while IFS= read -r line; do
    { printf '\x02'; printf '%s' "$line"; } > "$out/prompt_$((i++))"
  done < "$fx/tokenizer/encode_corpus.txt"
}

status=0
for t in "${targets[@]}"; do
  corpus="$work/$t"
  max_len=4096
  case $t in
    safetensors_fuzz) cp -r "$root/tests/fuzz/corpus/safetensors" "$corpus"
      extra=(-dict="$root/tests/fuzz/safetensors.dict") ;;
    structured_fuzz) mkdir -p "$corpus"; max_len=2048; extra=() ;;
    model_files_fuzz) seed_model_files "$corpus"; max_len=32768; extra=() ;;
    server_fuzz) cp -r "$root/tests/fuzz/corpus/server" "$corpus"
      extra=(-dict="$root/tests/fuzz/server.dict") ;;
    *) echo "fuzz.sh: unknown target $t" >&2; exit 2 ;;
  esac
  echo "== $t (${seconds}s)"
  "$build/tests/fuzz/$t" "$corpus" "${extra[@]}" \
    -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=30 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 || { status=$?; break; }
  if [[ -n "${FUZZ_CORPUS_OUT:-}" ]]; then
    mkdir -p "$FUZZ_CORPUS_OUT/$t" && cp -r "$corpus/." "$FUZZ_CORPUS_OUT/$t/"
  fi
done

if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: a fuzz target failed (exit $status); reproducers in $artifacts" >&2
  exit "$status"
fi
echo "fuzz.sh: no crashes in ${seconds}s per target"
