"""Acceptance test of issue 6: generation under JSON Schemas from the official
JSON-Schema-Test-Suite (draft 2020-12).

100 schemas are drawn (seeded) from the suite's schemas that DeepInfer compiles and that
admit at least one instance (the suite lists a valid one; a schema like `false` admits
none, and the engine refuses it with "no output can satisfy it"; their count is printed),
and all 100 requests run at once through `deepinfer generate --input` on the trained model
(models/deepinfer-v41-tiny). Every output that finishes must
  * end because the grammar completed (finish_reason "stop"),
  * parse as JSON, and
  * validate against its schema with the `jsonschema` package (formats asserted).

The requests ask for generation within the budget ("complete_within_max_tokens": true in
response_format, src/structured/README.md "Generation within a budget"): every token must
leave room for the shortest completion of the constraint in the tokens left before
MAX_TOKENS. The weak model was trained on Python source only; inside an unbounded JSON
string (type string without maxLength, keys and values of additionalProperties) it keeps
writing code, and in an object or array without maxProperties/maxItems it may keep adding
members. Without the option such output ends with "length" (a valid prefix, not a
document); measured 2026-11-30 before the option: 1 of 100 on this seed and prompt (ref/11,
extra properties with short code-like keys), 3 with seeds 7 and 99, 6 with a `json.loads`
prompt. With it, all 100 must finish with "stop" and validate: there is no tolerance
(results: bench/results/2026-11-30-structured-generation.md).
With DEEPINFER_SUITE_COMPARE=1 the same requests also run without the option and the
number that would not have finished is printed.

The data comes from scripts/fetch_structured_testdata.sh (run by scripts/setup.sh); the
test skips when it, the binary or jsonschema is missing. Environment overrides:
DEEPINFER_BINARY, DEEPINFER_STRUCTURED_DATA, DEEPINFER_SUITE_MODEL, DEEPINFER_SUITE_N,
DEEPINFER_SUITE_SEED, DEEPINFER_SUITE_COMPARE.
"""
import glob
import json
import os
import pathlib
import random
import subprocess
import time

import pytest

jsonschema = pytest.importorskip("jsonschema")

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("DEEPINFER_STRUCTURED_DATA", ROOT / "build" / ".cache" / "structured"))
SUITE = DATA / "JSON-Schema-Test-Suite" / "tests" / "draft2020-12"
MODEL = pathlib.Path(os.environ.get("DEEPINFER_SUITE_MODEL", ROOT / "models" / "deepinfer-v41-tiny"))
N = int(os.environ.get("DEEPINFER_SUITE_N", "100"))
SEED = int(os.environ.get("DEEPINFER_SUITE_SEED", "2026"))
COMPARE = os.environ.get("DEEPINFER_SUITE_COMPARE", "0") == "1"
# Finished generations used at most ~170 tokens in our runs without the option.
MAX_TOKENS = 200
# The model writes Python; a dict literal with short strings is the closest context to JSON.
PROMPT = 'config = {"name": "alpha", "size": 3, "tags": ["a", "b"], "ok": True}\ndata = '



def binary():
    path = os.environ.get("DEEPINFER_BINARY")
    if path:
        return path if os.path.exists(path) else None
    found = sorted(glob.glob(str(ROOT / "build*" / "deepinfer")), key=os.path.getmtime)
    return found[-1] if found else None


def suite_schemas():
    """(name, schema) for every test group of the suite's top-level files."""
    out = []
    for path in sorted(SUITE.glob("*.json")):
        for i, group in enumerate(json.loads(path.read_text())):
            satisfiable = any(t["valid"] for t in group["tests"])
            out.append((f"{path.stem}/{i}", group["schema"], satisfiable))
    return out


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def compiling_schemas(exe, schemas, tmp):
    """The schemas `deepinfer structured check` compiles."""
    path = tmp / "check.jsonl"
    path.write_text("".join(json.dumps({"schema": s, "instance_text": ""}) + "\n" for _, s, _ in schemas))
    out = run([exe, "structured", "check", "--jsonl", str(path)]).stdout.splitlines()
    assert len(out) == len(schemas)
    return [sch for sch, line in zip(schemas, out) if json.loads(line)["compiled"]]


@pytest.mark.skipif(not SUITE.is_dir(), reason=f"JSON-Schema-Test-Suite not found in {SUITE} (scripts/setup.sh)")
def test_generations_under_suite_schemas_validate(tmp_path):
    exe = binary()
    if exe is None:
        pytest.skip("deepinfer binary not built")
    schemas = suite_schemas()
    compiled = compiling_schemas(exe, schemas, tmp_path)
    ok = [(name, s) for name, s, satisfiable in compiled if satisfiable]
    print(f"suite: {len(schemas)} schemas, {len(compiled)} compile, {len(compiled) - len(ok)} of them admit no "
          f"instance (not drawn), {len(ok)} drawn from")
    picked = random.Random(SEED).sample(ok, min(N, len(ok)))

    def generate(complete):
        lines = []
        for i, (name, schema) in enumerate(picked):
            rf = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
            if complete:
                rf["complete_within_max_tokens"] = True
            lines.append({"id": f"{i}:{name}", "prompt": PROMPT, "response_format": rf, "max_tokens": MAX_TOKENS,
                          "temperature": 1.0, "seed": i})
        inp, outp = tmp_path / f"in-{complete}.jsonl", tmp_path / f"out-{complete}.jsonl"
        inp.write_text("".join(json.dumps(line) + "\n" for line in lines))
        t0 = time.monotonic()
        run([exe, "generate", "--model", str(MODEL), "--input", str(inp), "--output", str(outp),
             "--max-num-seqs", str(len(lines))])
        elapsed = time.monotonic() - t0
        results = [json.loads(line) for line in outp.read_text().splitlines()]
        assert len(results) == len(lines)
        return results, elapsed

    if COMPARE:
        plain, elapsed = generate(False)
        cut = [f"{name}: {res['text'][:100]!r}" for (name, _), res in zip(picked, plain)
               if res.get("finish_reason") == "length"]
        print(f"without complete_within_max_tokens ({elapsed:.1f} s): {len(cut)} of {len(plain)} reached max_tokens "
              f"unfinished:\n  " + "\n  ".join(cut))

    results, elapsed = generate(True)
    failures, tokens = [], []
    for (name, schema), res in zip(picked, results):
        if "error" in res:
            failures.append(f"{name}: error {res['error']}")
            continue
        tokens.append(res["usage"]["completion_tokens"])
        if res["finish_reason"] != "stop":
            failures.append(f"{name}: finish_reason {res['finish_reason']} after {len(res['token_ids'])} tokens: "
                            f"{res['text'][:120]!r}")
            continue
        try:
            value = json.loads(res["text"])
        except json.JSONDecodeError as e:
            failures.append(f"{name}: not JSON ({e}): {res['text'][:200]!r}")
            continue
        validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = list(validator(schema, format_checker=validator.FORMAT_CHECKER).iter_errors(value))
        if errors:
            failures.append(f"{name}: {res['text'][:200]!r} does not validate: {errors[0].message}")
    print(f"with complete_within_max_tokens: {len(results)} generations in {elapsed:.1f} s; completion tokens mean "
          f"{sum(tokens) / max(1, len(tokens)):.1f}, max {max(tokens, default=0)}; "
          f"{len(results) - len(failures)} of {len(results)} finished with stop and validate")
    assert not failures, f"{len(failures)} of {len(results)} failed:\n" + "\n".join(failures)
