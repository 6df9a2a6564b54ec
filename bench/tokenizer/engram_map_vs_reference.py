#!/usr/bin/env python3
"""Compares DeepInfer's Engram compressed-vocabulary map with the reference's.

The reference is `build_compressed_token_map` of transformers' deepseek_v41 modeling file,
which is not in any released transformers and so lives only in the ignored overlay
.ref/deepseek_v41/ (tools/README.md says how to place it). Its function is lifted out of
the file by name and run with the Python tokenizers library alone (it needs only
`tokenizer.backend_tokenizer` and `len(tokenizer)`, which for transformers' fast
tokenizers is get_vocab_size(with_added_tokens=True)), so neither torch nor transformers
is needed. Not a test: CI has no overlay. Result recorded in bench/results/tokenizer.md.

  engram_map_vs_reference.py TOKENIZER_JSON DEEPINFER_MAP_TXT [MODELING_FILE]

DEEPINFER_MAP_TXT is bench/tokenizer/engram_map_dump's output.
"""
import ast
import os
import sys

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FastTokenizerShim:
    def __init__(self, path):
        self.backend_tokenizer = Tokenizer.from_file(path)

    def __len__(self):
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)


def reference_function(modeling_path):
    with open(modeling_path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "build_compressed_token_map")
    namespace = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), modeling_path, "exec"), namespace)
    return namespace["build_compressed_token_map"]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    modeling = sys.argv[3] if len(sys.argv) == 4 else os.path.join(ROOT, ".ref", "deepseek_v41",
                                                                    "modeling_deepseek_v41.py")
    lookup, size = reference_function(modeling)(FastTokenizerShim(sys.argv[1]))
    with open(sys.argv[2]) as f:
        ours = [int(x) for x in f.read().split()]
    our_size, our_map = ours[0], ours[1:]
    differ = [i for i in range(min(len(lookup), len(our_map))) if lookup[i] != our_map[i]]
    print(f"reference: {size} compressed ids over {len(lookup)} token ids")
    print(f"deepinfer: {our_size} compressed ids over {len(our_map)} token ids")
    print(f"token ids with a different compressed id: {len(differ)}" + (f" (first: {differ[:10]})" if differ else ""))
    ok = size == our_size and lookup == our_map
    print("identical" if ok else "DIFFERENT")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
