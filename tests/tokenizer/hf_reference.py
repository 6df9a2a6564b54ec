#!/usr/bin/env python3
"""Reference ids for tests/tokenizer/corpus_test.cpp, computed by Hugging Face tokenizers.

Reads a corpus (tools/make_tokenizer_corpus.py: samples separated by "\\n") and writes
one JSON object per sample: every line on its own, then runs of consecutive lines joined
by "\\n" (so CRLF pairs and multi-line code are encoded whole), each with

  {"line": first line (0-based), "n": number of lines, "text": ...,
   "ids": encode(text, add_special_tokens=False).ids,
   "plain_ids": the same with special tokens not recognised (runs only),
   "decoded": decode(ids, skip_special_tokens=False), only where it differs from text}

The first line is a header: {"tokenizers": version, "lines": n, "samples": m}.

  hf_reference.py TOKENIZER_JSON CORPUS OUT_JSONL
"""

import json
import os
import sys

from tokenizers import Tokenizer

# Lengths of the runs of lines encoded whole, cycled through the corpus.
RUN_LENGTHS = [40, 7, 64, 13, 25, 2, 100]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    tok = Tokenizer.from_file(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    samples = [(i, 1, line) for i, line in enumerate(lines)]
    first_run = len(samples)
    start, k = 0, 0
    while start < len(lines):
        n = RUN_LENGTHS[k % len(RUN_LENGTHS)]
        samples.append((start, min(n, len(lines) - start), "\n".join(lines[start:start + n])))
        start, k = start + n, k + 1

    texts = [s[2] for s in samples]
    ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    decoded = tok.decode_batch(ids, skip_special_tokens=False)
    # tokenizers' switch for treating special tokens as plain text (DeepInfer's
    # allow_special=false).
    tok.encode_special_tokens = True
    plain = [e.ids for e in tok.encode_batch(texts[first_run:], add_special_tokens=False)]

    with open(sys.argv[3] + ".part", "w", encoding="utf-8") as out:
        import tokenizers
        out.write(json.dumps({"tokenizers": tokenizers.__version__, "lines": len(lines), "samples": len(samples)})
                  + "\n")
        for j, (line, n, sample) in enumerate(samples):
            rec = {"line": line, "n": n, "text": sample, "ids": ids[j]}
            if j >= first_run:
                rec["plain_ids"] = plain[j - first_run]
            if decoded[j] != sample:
                rec["decoded"] = decoded[j]
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    os.replace(sys.argv[3] + ".part", sys.argv[3])


if __name__ == "__main__":
    main()
