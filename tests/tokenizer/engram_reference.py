#!/usr/bin/env python3
"""The Engram compressed-vocabulary map (MODEL_V41.md §5.1) of a tokenizer.json, computed
with Hugging Face tokenizers' decode and normalizers (tools/gen_tokenizer_vectors.py's
engram_key), for tests/tokenizer/corpus_test.cpp. Writes the number of compressed ids,
then the compressed id of each token id in range(len(tokenizer)), one per line.

  engram_reference.py TOKENIZER_JSON OUT
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from gen_tokenizer_vectors import engram_key  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tok = Tokenizer.from_file(sys.argv[1])
    keys, ids = {}, []
    # transformers' len(tokenizer): distinct token strings, added tokens included.
    for i in range(tok.get_vocab_size(with_added_tokens=True)):
        ids.append(keys.setdefault(engram_key(tok, i), len(keys)))
    with open(sys.argv[2], "w") as f:
        f.write(f"{len(keys)}\n" + "".join(f"{i}\n" for i in ids))


if __name__ == "__main__":
    main()
