#!/usr/bin/env python3
"""Greedy continuations of the golden fixtures, computed by the transformers reference.

For each fixture directory (default: both under tests/fixtures), loads the checkpoint into
transformers' DeepseekV41ForCausalLM (released FP8/FP4 tensors are dequantized exactly as
tools/make_fixtures.py does), feeds the first P tokens of reference.safetensors' `tokens`
through a fresh cache, then appends the argmax token one step at a time. Writes
greedy.json: {"prompt": [...], "greedy": [...], "min_margin": top-1 minus top-2 logit at the
closest step} so tests can tell a real mismatch from a near-tie.

Run with the same environment as make_fixtures.py (see tools/README.md):
  /tmp/venv/bin/python tools/make_greedy_reference.py [--steps 24] [--prompt-len 8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import make_fixtures as mf


def load_model(fixture: Path, modeling, configuration):
    import torch
    from safetensors import safe_open
    from tokenizers import Tokenizer

    cfg_json = json.loads((fixture / "config.json").read_text())
    text = cfg_json.get("text_config", cfg_json)
    text = {k: v for k, v in text.items() if k not in ("architectures", "model_type", "torch_dtype",
                                                       "transformers_version", "dtype")}
    cfg = configuration.DeepseekV41TextConfig(**text)
    cfg._attn_implementation = "eager"
    model = modeling.DeepseekV41ForCausalLM(cfg).float().eval()
    tensors = {}
    for f in sorted(fixture.glob("*.safetensors")):
        if f.name == "reference.safetensors":
            continue
        with safe_open(str(f), "pt") as h:
            for k in h.keys():
                tensors[k] = h.get_tensor(k)
    state = {}
    for name in tensors:
        if name.endswith(".scale") and not name.endswith("engram.embed.scale"):
            continue
        hf = name if name.startswith("model.") or name == "lm_head.weight" else mf.hf_name_of(name)
        if name.endswith("engram.embed.scale"):
            state[hf] = torch.ones_like(tensors[name], dtype=torch.float32)  # float table: unused
            continue
        v = mf.np_dequant(name, tensors)
        state[hf] = torch.from_numpy(v).float()
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all("inv_freq" in m for m in missing), missing
    tok = Tokenizer.from_file(str(fixture / "tokenizer.json"))
    model.model.bind_tokenizer(mf.wrap_tokenizer(tok))
    return model, cfg


def greedy(model, modeling, cfg, prompt, steps):
    import torch

    model.model.engram_hash_state.history = None
    cache = mf.fresh_cache(modeling, cfg)
    out, margins = [], []
    ids = torch.tensor(prompt)[None]
    with torch.no_grad():
        for _ in range(steps):
            logits = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[0, -1].double()
            top = torch.topk(logits, 2)
            margins.append(float(top.values[0] - top.values[1]))
            nxt = int(top.indices[0])
            out.append(nxt)
            ids = torch.tensor([[nxt]])
    return out, min(margins)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", nargs="*", default=[str(mf.REPO / "tests/fixtures/v41_tiny_f32"),
                                                      str(mf.REPO / "tests/fixtures/v41_tiny_quant")])
    ap.add_argument("--overlay", default=str(mf.REPO / ".ref" / "deepseek_v41"))
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--prompt-len", type=int, default=8)
    args = ap.parse_args()
    modeling, configuration = mf.import_reference(Path(args.overlay))
    from safetensors import safe_open

    for d in map(Path, args.fixtures):
        model, cfg = load_model(d, modeling, configuration)
        with safe_open(str(d / "reference.safetensors"), "pt") as h:
            prompt = [int(x) for x in h.get_tensor("tokens")[: args.prompt_len]]
        cont, margin = greedy(model, modeling, cfg, prompt, args.steps)
        (d / "greedy.json").write_text(json.dumps({"prompt": prompt, "greedy": cont, "min_margin": margin}) + "\n")
        print(d.name, "greedy", cont, "min margin", round(margin, 5))


if __name__ == "__main__":
    main()
