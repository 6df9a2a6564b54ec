"""The same measurement as bench_tokenizer.cpp with the Python tokenizers library (its
Rust core; the per-call Python overhead is included in the line-by-line figure). CPU time
is the whole process's, so work on any helper thread counts too."""
import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

tok = Tokenizer.from_file(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8", newline="").read()
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
lines = text.split("\n")
if lines and lines[-1] == "":
    lines.pop()
best_whole = best_lines = cpu_whole = cpu_lines = 1e30
for _ in range(runs):
    c0, t0 = time.process_time(), time.perf_counter()
    ids_whole = len(tok.encode(text, add_special_tokens=False).ids)
    c1, t1 = time.process_time(), time.perf_counter()
    ids_lines = sum(len(tok.encode(line, add_special_tokens=False).ids) for line in lines)
    c2, t2 = time.process_time(), time.perf_counter()
    cpu_whole, cpu_lines = min(cpu_whole, c1 - c0), min(cpu_lines, c2 - c1)
    best_whole, best_lines = min(best_whole, t1 - t0), min(best_lines, t2 - t1)
n = len(text.encode("utf-8"))
print(json.dumps({"bytes": n, "whole_mb_s": round(n / best_whole / 1e6, 3), "lines_mb_s": round(n / best_lines / 1e6, 3),
                  "whole_cpu_mb_s": round(n / cpu_whole / 1e6, 3), "lines_cpu_mb_s": round(n / cpu_lines / 1e6, 3),
                  "ids_whole": ids_whole, "ids_lines": ids_lines}))
