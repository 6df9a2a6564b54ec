"""Encode expectations for the tokenizer tests (called by gen_tokenizer_vectors.py vectors).

For the trained fixture tokenizer and variants of it that exercise the other
pre-tokenizer, normalizer and added-token settings, every line of
tests/fixtures/tokenizer/encode_corpus.txt (escapes like \\u0301 and \\r\\n expanded) and
random mixtures of them are encoded by the Python tokenizers library, with special
tokens recognised and not (encode_special_tokens). Each `<name>.encode` line is
`e <allow_special> <text hex> <ids>`.
"""

import copy
import json
import os
import random
import re

from tokenizers import Tokenizer

ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|n|r|t)")


def unescape(line):
    def one(m):
        e = m.group(1)
        return {"n": "\n", "r": "\r", "t": "\t"}.get(e) or chr(int(e[1:], 16))
    return ESCAPE.sub(one, line)


def corpus(fixtures, rng):
    with open(os.path.join(fixtures, "encode_corpus.txt"), encoding="utf-8") as f:
        lines = [unescape(line.rstrip("\n")) for line in f]
    cases = list(lines)
    cases.append("\n".join(lines))
    for _ in range(150):
        parts = []
        for _ in range(rng.randrange(1, 5)):
            line = rng.choice(lines)
            a = rng.randrange(len(line) + 1)
            b = rng.randrange(a, len(line) + 1)
            parts.append(line[a:b])
        cases.append(rng.choice(["", " ", "\n", "  "]).join(parts))
    for _ in range(60):  # long words (the merge heap) and repetitions (the cache)
        word = "".join(rng.choice("ab日本 é1") for _ in range(rng.randrange(40, 300)))
        cases.append(word if rng.random() < 0.5 else word.replace(" ", ""))
    return cases


def added(content, **flags):
    entry = {"id": 0, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": True, "special": False}
    entry.update(flags)
    return entry


def variants(base):
    """Other settings on the trained vocabulary and merges."""
    out = {}
    v = copy.deepcopy(base)
    v["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
    v["added_tokens"] += [
        added("<L>", lstrip=True, normalized=False, special=True),
        added("<R>", rstrip=True, normalized=False),
        added("<LR>", lstrip=True, rstrip=True, special=True, normalized=False),
        added("word", single_word=True),
        added("ÉTÉ"),  # normalized: matched as "été" in lowercased text
        added("[x]", single_word=True, lstrip=True, rstrip=True, normalized=False),
    ]
    out["bpe_variant_bytelevel"] = v

    v = copy.deepcopy(base)
    v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "Removed", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[aeiouåäö]"}, "behavior": "MergedWithPrevious", "invert": False},
        {"type": "Split", "pattern": {"Regex": r"\p{P}+"}, "behavior": "Contiguous", "invert": True},
        {"type": "Split", "pattern": {"Regex": r"\d"}, "behavior": "Isolated", "invert": False},
        {"type": "Digits", "individual_digits": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    out["bpe_variant_splits"] = v

    # No ByteLevel pre-tokenizer: the normalizer maps bytes, and the model sees those
    # characters directly (the path without deferred byte mapping).
    v = copy.deepcopy(base)
    v["normalizer"] = {"type": "ByteLevel"}
    v["pre_tokenizer"] = {"type": "Split", "pattern": {
        "Regex": r"Ġ?[A-Za-z]+|Ġ?\p{L}+|[0-9]{1,2}|\s+|[^\sA-Za-z0-9]"}, "behavior": "MergedWithNext",
        "invert": False}
    v["added_tokens"] += [added("hello", normalized=True), added("Ġworld", normalized=False)]
    out["bpe_variant_nobytelevel"] = v
    return out


def write_encode_file(tok, path, cases):
    lines = []
    for text in cases:
        for allow in (1, 0):
            tok.encode_special_tokens = not allow
            ids = tok.encode(text, add_special_tokens=False).ids
            lines.append(f"e {allow} {text.encode('utf-8').hex() or '-'} {','.join(map(str, ids)) or '-'}")
    tok.encode_special_tokens = False
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def write_encode_vectors(fixtures, rng):
    cases = corpus(fixtures, rng)
    with open(os.path.join(fixtures, "bpe_tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    names = ["bpe_tokenizer", "handmade_sequence", "handmade_nodecoder"]
    for name, spec in variants(base).items():
        with open(os.path.join(fixtures, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(spec, f, ensure_ascii=False, indent=1)
        names.append(name)
    for name in names:
        tok = Tokenizer.from_file(os.path.join(fixtures, name + ".json"))
        write_encode_file(tok, os.path.join(fixtures, name + ".encode"), cases)
    print(f"wrote encode vectors for {', '.join(names)} ({len(cases)} texts each)")


if __name__ == "__main__":
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    write_encode_vectors(os.path.join(here, "tests", "fixtures", "tokenizer"), random.Random(20261201))
