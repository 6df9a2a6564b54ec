#!/usr/bin/env python3
"""Writes the seed corpus for safetensors_fuzz: a few tiny valid files and one of each
common kind of corruption, so the fuzzer starts next to every validation branch.

Usage: tests/fuzz/make_corpus.py [OUT_DIR]   (default: tests/fuzz/corpus/safetensors)
"""
import json
import os
import struct
import sys


def header_file(header, data=b"", length=None, pad=True):
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def seeds():
    yield "valid_empty", header_file({})
    yield "valid_metadata", header_file({"__metadata__": {"format": "pt"}, "w": tensor("F32", [2], 0, 8)}, bytes(8))
    yield "valid_mixed", header_file(
        {
            "a": tensor("BF16", [2, 2], 0, 8),
            "b": tensor("F8_E4M3", [3], 8, 11),
            "s": tensor("F8_E8M0", [1, 1], 11, 12),
            "z": tensor("I64", [0, 5], 12, 12),
            "q": tensor("I8", [4], 12, 16),
        },
        bytes(range(16)),
    )
    yield "valid_scalar", header_file({"x": tensor("F64", [], 0, 8)}, bytes(8))
    yield "bad_truncated", b"\x10\x00\x00"
    yield "bad_length_past_eof", header_file({}, length=4096)
    yield "bad_not_json", header_file(b'{"a": nope}')
    yield "bad_array", header_file([1, 2])
    yield "bad_dtype", header_file({"w": tensor("F7", [1], 0, 1)}, b"\0")
    yield "bad_negative_shape", header_file({"w": tensor("U8", [-1], 0, 0)})
    yield "bad_shape_overflow", header_file({"w": tensor("U8", [2**32, 2**32], 0, 1)}, b"\0")
    yield "bad_offsets_reversed", header_file({"w": tensor("U8", [0], 4, 1)}, bytes(4))
    yield "bad_size_mismatch", header_file({"w": tensor("F16", [3], 0, 4)}, bytes(6))
    yield "bad_overlap", header_file({"a": tensor("U8", [4], 0, 4), "b": tensor("U8", [4], 2, 6)}, bytes(8))
    yield "bad_metadata", header_file({"__metadata__": {"k": 1}})
    yield "bad_duplicate", header_file(b'{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{}}')


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
