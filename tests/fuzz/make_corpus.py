#!/usr/bin/env python3
"""Writes the committed seed corpora: for safetensors_fuzz a few tiny valid files and one
of each common kind of corruption, for server_fuzz one valid request per endpoint and
feature (the first byte picks the endpoint, as server_fuzz.cpp reads it), so each fuzzer
starts next to every validation branch. (model_files_fuzz's seeds are the fixtures
themselves; scripts/fuzz.sh prefixes them at run time.)

Usage: tests/fuzz/make_corpus.py [OUT_ROOT]   (default: tests/fuzz/corpus)
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


# server_fuzz's endpoint selector (its first byte): completions, chat, tokenize, detokenize.
COMPLETIONS, CHAT, TOKENIZE, DETOKENIZE = 0, 1, 2, 3


def request(endpoint, body):
    return bytes([endpoint]) + json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def server_seeds():
    user = [{"role": "user", "content": "Hi"}]
    yield "completion", request(COMPLETIONS, {"model": "fake-model", "prompt": "Say hi", "max_tokens": 5})
    yield "completion_ids_stream", request(COMPLETIONS, {"prompt": [[5, 6, 7], [8]], "max_tokens": 3, "stream": True,
                                                         "stream_options": {"include_usage": True}, "n": 2, "seed": 7})
    yield "completion_sampling", request(COMPLETIONS, {
        "prompt": "x", "max_tokens": 4, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.05,
        "presence_penalty": 0.5, "frequency_penalty": 0.1, "repetition_penalty": 1.1, "logprobs": 3,
        "stop": ["\n", "end"], "stop_token_ids": [1], "logit_bias": {"65": -100}, "ignore_eos": True})
    yield "completion_echo", request(COMPLETIONS, {"prompt": "e", "max_tokens": 2, "echo": True})
    yield "completion_regex", request(COMPLETIONS, {"prompt": "n:", "max_tokens": 8, "structured_outputs": {"regex": "[0-9]+"}})
    yield "completion_grammar", request(COMPLETIONS, {"prompt": "g", "max_tokens": 8, "guided_grammar": 'root ::= "a" [b-c]*'})
    yield "completion_choice", request(COMPLETIONS, {"prompt": "c", "max_tokens": 8, "guided_choice": ["yes", "no"]})
    yield "chat", request(CHAT, {"model": "fake-model", "messages": user, "max_tokens": 5})
    yield "chat_roles_stream", request(CHAT, {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                     {"role": "assistant", "content": "Hello", "reasoning_content": "think"},
                     {"role": "user", "content": "[[say:done]]"}],
        "stream": True, "max_completion_tokens": 6, "logprobs": True, "top_logprobs": 2,
        "chat_template_kwargs": {"thinking": True}, "reasoning_effort": "high"})
    yield "chat_json_schema", request(CHAT, {"messages": user, "max_tokens": 16, "response_format": {
        "type": "json_schema", "json_schema": {"name": "p", "strict": True, "schema": {
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}}, "required": ["a"]}}}})
    yield "chat_json_object", request(CHAT, {"messages": user, "max_tokens": 16, "response_format": {"type": "json_object"}})
    yield "chat_tools", request(CHAT, {
        "messages": user + [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                                   "function": {"name": "f", "arguments": "{\"q\":1}"}}]},
                            {"role": "tool", "tool_call_id": "c1", "content": "42"}],
        "tools": [{"type": "function", "function": {"name": "f", "description": "d",
                                                     "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}}}}],
        "tool_choice": "auto", "max_tokens": 8})
    yield "tokenize_prompt", request(TOKENIZE, {"prompt": "hello", "add_special_tokens": True, "return_token_strs": True})
    yield "tokenize_messages", request(TOKENIZE, {"messages": user, "add_generation_prompt": True})
    yield "detokenize", request(DETOKENIZE, {"tokens": [72, 105, 259]})
    yield "models", bytes([4]) + b"fake-model"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    for sub, gen, ext in (("safetensors", seeds, ".safetensors"), ("server", server_seeds, ".req")):
        out = os.path.join(root, sub)
        os.makedirs(out, exist_ok=True)
        for name, data in gen():
            with open(os.path.join(out, name + ext), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
