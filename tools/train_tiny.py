#!/usr/bin/env python3
"""Trains a tiny DeepSeek-V4.1 language model with the transformers reference modeling
code and exports it in the released DeepSeek format (see docs/TRAINED_MODEL.md).

Subcommands:
  train   (GPU) corpus from the installed Python packages' sources -> byte-level BPE
          tokenizer -> training through the reference's CACHED path -> export (FP8 32x32
          dense linears, FP4 1x32 experts, FP8 engram table, composite config.json,
          tokenizer.json) -> reference perplexity of the exported weights on the
          held-out text -> greedy sample. Everything lands in --out.
  eval    reference perplexity of an exported checkpoint on a text file, with the
          window definition of `deepinfer eval-ppl` (src/cli/eval_ppl_cmd.cpp).
  sample  greedy continuation of a prompt by the reference (cached path, fresh cache).

The reference modeling code (transformers models/deepseek_v41) is mounted from the
overlay directory exactly as tools/make_fixtures.py does (whose helpers this script
imports: tokenizer wrapper, config completion, cache construction, quantizers, writer).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
import make_fixtures as mf  # noqa: E402

REPO = TOOLS.parent
BOS, EOS, PAD = mf.BOS, mf.EOS, mf.PAD

# Held-out evaluation text is taken only from these (permissively licensed) packages.
HELDOUT_PACKAGES = ("numpy", "scipy", "sklearn", "networkx", "sympy", "pandas", "torch", "jax")


def log(*a):
    print(*a, flush=True)


# --------------------------------------------------------------------------------------
# the model's shape
# --------------------------------------------------------------------------------------
def text_config_dict(vocab_size: int, seq_len: int) -> dict:
    """~28M parameters; every schedule field explicit."""
    return {
        "model_type": "deepseek_v41_text",
        "vocab_size": vocab_size,
        "hidden_size": 256,
        "num_hidden_layers": 8,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "qk_rope_head_dim": 32,
        "q_lora_rank": 128,
        "o_groups": 2,
        "o_lora_rank": 128,
        "sliding_window": 64,
        # 2 window-only layers, a ratio-2 group (source 2), a ratio-1 group (source 5,
        # the candidate source) with a Reindex layer (7) restricted to its candidates.
        "compress_ratios": [0, 0, 2, 2, 2, 1, 1, 1],
        "kv_source_layer_ids": [2, 5],
        "index_source_layer_ids": [2, 5, 7],
        "candidate_source_layer_id": 5,
        "candidate_topk_blocks": 8,
        "candidate_block_size": 8,
        "index_n_heads": 16,
        "index_head_dim": 64,
        "index_topk": 32,
        "n_routed_experts": 16,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 192,
        "scoring_func": "sqrtsoftplus",
        "topk_method": "noaux_tc",
        "gate_temp": 1.0,
        "norm_topk_prob": True,
        "routed_scaling_factor": 1.5,
        "swiglu_limit": 10.0,
        "hidden_act": "silu",
        "hc_mult": 4,
        "hc_sinkhorn_iters": 20,
        "hc_eps": 1e-6,
        "rms_norm_eps": 1e-20,
        "rope_theta": 10000.0,
        "compress_rope_theta": 160000.0,
        # YaRN scaled down with the model: original context = the training length.
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "original_max_position_embeddings": seq_len,
        },
        "max_position_embeddings": 4 * seq_len,
        "engram_layer_ids": [1],
        "engram_vocab_size": 6000,
        "engram_max_ngram_size": 3,
        "engram_n_heads": 4,
        "engram_head_dim": 32,
        "engram_pad_id": 2,
        "num_nextn_predict_layers": 0,
        "dspark_target_layer_ids": [4, 6, 7],
        "dspark_noise_token_id": vocab_size - 1,  # no DSpark layers; kept inside the vocabulary
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 2,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
    }


def composite_config(text: dict) -> dict:
    return {
        "architectures": ["DeepseekV41ForCausalLM"],
        "model_type": "deepseek_v41",
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "quantization_config": {
            "quant_method": "fp8",
            "activation_scheme": "dynamic",
            "weight_block_size": [32, 32],
            "scale_fmt": "ue8m0",
            "expert_dtype": "fp4",
        },
        "text_config": text,
    }


def build_model(modeling, configuration, composite: dict):
    """The HF model from a composite config dict (as make_fixtures.fixture_quant does)."""
    import torch

    cdict = {k: v for k, v in composite.items() if k not in ("model_type", "quantization_config")}
    cfg_all = configuration.DeepseekV41Config(**cdict)
    model = modeling.DeepseekV41ForCausalLM(cfg_all).float()
    model.config._attn_implementation = "eager"
    assert not any(torch.isnan(p).any() for p in model.parameters())
    return model


# --------------------------------------------------------------------------------------
# corpus
# --------------------------------------------------------------------------------------
def site_roots() -> list[Path]:
    import site
    import sysconfig

    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    try:
        roots.update(site.getsitepackages())
    except AttributeError:
        pass
    return sorted({Path(r).resolve() for r in roots if Path(r).is_dir()})


def _hash(s: str) -> int:
    return int.from_bytes(hashlib.sha1(s.encode()).digest()[:8], "little")


def collect_corpus(max_bytes: int, heldout_bytes: int, exts=(".py", ".md", ".rst")):
    """Source and docs of the installed packages. Files are ordered by a hash of their
    path (a uniform sample across packages); 1 file in 64 from HELDOUT_PACKAGES is held
    out. Returns (train_docs, heldout_docs, stats)."""
    files = []
    for root in site_roots():
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.endswith(".dist-info"))
            for f in filenames:
                if f.endswith(exts):
                    p = Path(dirpath) / f
                    rel = str(p.relative_to(root))
                    try:
                        size = p.stat().st_size
                    except OSError:
                        continue
                    if 200 <= size <= 300_000:
                        files.append((_hash(rel), rel, p))
    files.sort()
    seen, train, held = set(), [], []
    tb = hb = 0
    for h, rel, p in files:
        if rel in seen:
            continue
        seen.add(rel)
        is_held = rel.split("/", 1)[0] in HELDOUT_PACKAGES and h % 64 == 0 and rel.endswith(".py")
        if (is_held and hb >= heldout_bytes) or (not is_held and tb >= max_bytes):
            continue
        try:
            text = p.read_bytes().decode("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "\r" in text or max((len(line) for line in text.split("\n")), default=0) > 400:
            continue  # generated / minified / CRLF files
        if is_held:
            held.append((rel, text))
            hb += len(text)
        else:
            train.append((rel, text))
            tb += len(text)
        if tb >= max_bytes and hb >= heldout_bytes:
            break
    stats = {"files_seen": len(files), "train_files": len(train), "train_chars": tb, "heldout_files": len(held),
             "heldout_chars": hb, "roots": [str(r) for r in site_roots()]}
    return train, held, stats


def build_tokenizer(docs: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer)
    assert tok.token_to_id(BOS) == 0 and tok.token_to_id(EOS) == 1 and tok.token_to_id(PAD) == 2
    return tok


def encode_docs(tok, docs: list[str]) -> np.ndarray:
    """Documents concatenated, each followed by EOS."""
    out = []
    for i in range(0, len(docs), 2048):
        for e in tok.encode_batch(docs[i : i + 2048]):
            out.append(np.asarray(e.ids, dtype=np.int32))
            out.append(np.asarray([1], dtype=np.int32))
    return np.concatenate(out)


# --------------------------------------------------------------------------------------
# training helpers: straight-through fake quantization, QAT, indexer distillation
# --------------------------------------------------------------------------------------
def install_ste(modeling):
    """Makes the reference's activation fake-quantizers (FP8 window KV, FP4 compressed
    KV and indexer q/k) straight-through for gradients. Forward values are unchanged
    (the original function computes them); only the backward becomes identity (the
    original's float8 casts would round the gradients to e4m3 and its FP4 table lookup
    has no gradient at all)."""
    import torch

    orig8, orig4 = modeling._fake_quant_fp8_block, modeling._fake_quant_fp4_block

    class STE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, fn):
            return fn(x.detach())

        @staticmethod
        def backward(ctx, g):
            return g, None

    def fq8(x, block_size=32):
        if torch.is_grad_enabled() and x.requires_grad:
            return STE.apply(x, lambda t: orig8(t, block_size))
        return orig8(x, block_size)

    def fq4(x, block_size, e4m3_scales=False):
        if torch.is_grad_enabled() and x.requires_grad:
            return STE.apply(x, lambda t: orig4(t, block_size, e4m3_scales))
        return orig4(x, block_size, e4m3_scales)

    modeling._fake_quant_fp8_block, modeling._fake_quant_fp4_block = fq8, fq4

    def restore():
        modeling._fake_quant_fp8_block, modeling._fake_quant_fp4_block = orig8, orig4

    return restore


def _ceil_log2(x):
    """ceil(log2(x)) exactly for float64 x > 0 (make_fixtures.ue8m0_exponent in torch)."""
    import torch

    m, e = torch.frexp(x)
    return torch.where(m == 0.5, e - 1, e).to(torch.float64)


def tq_fp8_blocks(w):
    """[..., O, I] -> the values make_fixtures.quant_fp8_blocks writes (O, I multiples of 32)."""
    import torch

    *lead, O, I = w.shape
    b = w.reshape(*lead, O // 32, 32, I // 32, 32)
    amax = b.abs().amax(dim=(-3, -1), keepdim=True).double().clamp_min(1e-30)
    s = torch.exp2(_ceil_log2(amax / 448.0)).float()
    q = (b / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s
    return q.reshape(w.shape)


def tq_rows(w, fp4: bool):
    """[..., R, C] -> make_fixtures.quant_fp4_rows (fp4) / quant_fp8_rows32 values."""
    import torch

    *lead, R, C = w.shape
    b = w.reshape(*lead, R, C // 32, 32)
    amax = b.abs().amax(-1, keepdim=True).double().clamp_min(1e-30)
    s = torch.exp2(_ceil_log2(amax / (6.0 if fp4 else 448.0))).float()
    if fp4:
        import transformers.models.deepseek_v41.modeling_deepseek_v41 as modeling

        q = (b / s).clamp(-6.0, 6.0)
        codes = modeling._e2m1_codes(q)
        vals = modeling._fp4_lut(w.device)[codes.long()]
    else:
        vals = (b / s).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    return (vals * s).reshape(w.shape)


class QAT:
    """Weight fake quantization with a straight-through estimator: before the forward
    each quantized weight's storage is replaced by its exported (quantized) value;
    after the backward the fp32 master value is put back, and the optimizer applies the
    gradient taken at the quantized point to it."""

    def __init__(self, model):
        import re

        groups = {}
        for name, p in model.named_parameters():
            r = mf.released_name(name)
            if r.endswith("engram.embed.weight"):
                kind = "rows8"
            elif r.endswith(mf.FP8_SUFFIXES):
                kind = "fp8"
            elif re.search(r"\.ffn\.experts\.\d+\.w[123]\.weight$", r):
                kind = "fp4"
            else:
                continue
            assert p.shape[-1] % 32 == 0 and (kind != "fp8" or p.shape[0] % 32 == 0), (name, p.shape)
            groups.setdefault((kind, tuple(p.shape)), []).append(p)
        self.groups = groups
        self.saved = None

    def swap_in(self):
        import torch

        self.saved = []
        with torch.no_grad():
            for (kind, _), ps in self.groups.items():
                w = torch.stack([p.data for p in ps])
                q = tq_fp8_blocks(w) if kind == "fp8" else tq_rows(w, fp4=(kind == "fp4"))
                for i, p in enumerate(ps):
                    self.saved.append((p, p.data))
                    p.data = q[i]

    def swap_out(self):
        if self.saved:
            for p, d in self.saved:
                p.data = d
        self.saved = None


class Probes:
    """Forward hooks: router choices (for the aux-loss-free balancing bias), the
    attention probabilities and the indexer inputs of index-source layers (for the
    indexer's distillation loss)."""

    def __init__(self, model, modeling):
        self.model, self.modeling = model, modeling
        self.routes, self.attn, self.idx = {}, {}, {}
        self.handles = []
        self.enabled = True
        cfg = model.config
        self.index_layers = list(cfg.index_source_layer_ids)
        for li, layer in enumerate(model.model.layers):
            self.handles.append(layer.ffn.gate.register_forward_hook(self._route_hook(li)))
            if li in self.index_layers:
                self.handles.append(layer.attn.register_forward_hook(self._attn_hook(li)))
                self.handles.append(layer.attn.indexer.register_forward_hook(self._idx_hook(li)))

    def _route_hook(self, li):
        def fn(mod, args, out):
            if self.enabled:
                self.routes[li] = out[1].detach()

        return fn

    def _attn_hook(self, li):
        def fn(mod, args, out):
            if self.enabled:
                self.attn[li] = out[1]

        return fn

    def _idx_hook(self, li):
        def fn(mod, args, out):
            if self.enabled:
                hs, qr, latent, fgp, pos, cache_layer, shared = args
                self.idx[li] = (hs, qr, latent, fgp, pos, shared.get("candidates"))

        return fn

    def clear(self):
        self.routes.clear(), self.attn.clear(), self.idx.clear()

    def indexer_loss(self):
        """KL(attention over the compressed entries, summed over heads || softmax of the
        indexer scores), per index source, on detached inputs: trains only the indexer
        (wq_b, weights_proj; wk and k_norm at the KV sources), as DeepSeek-V3.2's
        lightning indexer is trained. The target lives on the entries the layer could
        attend (its top-k set in the sparse phase, all visible entries in the dense one)."""
        import torch

        m = self.modeling
        total, n = 0.0, 0
        keys = None
        for li in self.index_layers:
            if li not in self.idx or li not in self.attn:
                continue
            ind = self.model.model.layers[li].attn.indexer
            hs, qr, latent, fgp, pos, cand = self.idx[li]
            B, S, _ = hs.shape
            ratio = ind.compress_ratio
            if ind.owns_k:
                k = ind.k_norm(ind.wk(latent.detach()))
                gpos = fgp + ratio * torch.arange(latent.shape[1], device=k.device)
                cos, sin = ind.rotary_emb(k, position_ids=gpos.unsqueeze(0).expand(B, -1), layer_type="compress")
                k = m._fake_quant_fp4_block(m.apply_rotary_pos_emb(k, cos, sin), block_size=32)
                keys = k
            else:
                k = keys.detach()
            T = k.shape[1]
            cos_q, sin_q = ind.rotary_emb(hs, position_ids=pos, layer_type="compress")
            q = ind.wq_b(qr.detach()).view(B, S, ind.num_heads, ind.head_dim)
            q = m._fake_quant_fp4_block(m.apply_rotary_pos_emb(q, cos_q, sin_q), block_size=32)
            scores = torch.einsum("bshd,btd->bsht", q.float(), k.float()).relu() * ind.softmax_scale
            w = ind.weights_proj(hs.detach()).float() * ind.heads_scaling
            logits = (scores * w.unsqueeze(-1)).sum(2)  # [B, S, T]
            visible = torch.arange(T, device=k.device).view(1, 1, -1) < (pos.long().unsqueeze(-1) + 1) // ratio
            if ind.uses_candidates and cand is not None:
                visible = visible & cand
            att = self.attn[li]
            target = att[..., att.shape[-1] - T :].detach().float().sum(1) * visible  # [B, S, T]
            z = target.sum(-1, keepdim=True)
            valid = z.squeeze(-1) > 1e-6
            if not bool(valid.any()):
                continue
            target = target / z.clamp_min(1e-12)
            logq = torch.log_softmax(logits.masked_fill(~visible, -1e9), dim=-1).masked_fill(~visible, 0.0)
            kl = (target * (target.clamp_min(1e-12).log() - logq)).sum(-1)
            total = total + kl[valid].mean()
            n += 1
        return total / max(n, 1)


def update_router_bias(model, probes, rate: float):
    """DeepSeek's auxiliary-loss-free balancing: raise the selection bias of
    under-loaded experts, lower it for over-loaded ones."""
    import torch

    loads = []
    with torch.no_grad():
        for li, idx in probes.routes.items():
            gate = model.model.layers[li].ffn.gate
            counts = torch.bincount(idx.flatten(), minlength=gate.bias.shape[0]).float()
            gate.bias.add_(rate * torch.sign(counts.mean() - counts))
            loads.append((counts.max() / counts.mean()).item())
    return max(loads) if loads else 0.0


# --------------------------------------------------------------------------------------
# reference evaluation (the definition of `deepinfer eval-ppl`)
# --------------------------------------------------------------------------------------
def ppl_windows(n: int, context: int, stride: int):
    """Same as src/cli/eval_ppl_cmd.cpp ppl_windows: window k reads [k*stride,
    min(k*stride + context, n)) from a fresh state and scores the targets no earlier
    window scored."""
    assert context >= 2 and 1 <= stride <= context
    out, scored_to, b = [], 1, 0
    while b < n:
        e = min(b + context, n)
        first = max(b + 1, scored_to)
        if e - b >= 2 and first < e:
            out.append((b, e, first))
            scored_to = e
        if e == n:
            break
        b += stride
    return out


def forward_fresh(model, modeling, ids_2d, grad=False):
    """One forward through a fresh hand-built cache (the cached path) from position 0."""
    import torch

    model.model.engram_hash_state.history = None
    cache = mf.fresh_cache(modeling, model.config)
    with torch.set_grad_enabled(grad):
        return model(input_ids=ids_2d, past_key_values=cache, use_cache=True).logits


def reference_ppl(model, modeling, ids, context: int, stride: int, batch: int, device):
    """(scored tokens, nll sum) of `ids` under the model: windows of ppl_windows, each
    one forward from a fresh cache; windows of equal length run batched."""
    import torch

    wins = ppl_windows(len(ids), context, stride)
    ids_t = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    nll, count = 0.0, 0
    i = 0
    while i < len(wins):
        j = i
        while j < len(wins) and j - i < batch and wins[j][1] - wins[j][0] == wins[i][1] - wins[i][0]:
            j += 1
        x = torch.stack([ids_t[b:e] for b, e, _ in wins[i:j]]).to(device)
        logits = forward_fresh(model, modeling, x).double()
        logp = torch.log_softmax(logits, dim=-1)
        for r, (b, e, first) in enumerate(wins[i:j]):
            rows = torch.arange(first - 1 - b, e - 1 - b, device=device)
            tg = x[r, rows + 1]
            nll -= float(logp[r, rows, tg].sum())
            count += e - first
        i = j
    return count, nll


def greedy(model, modeling, tok, prompt: str, max_tokens: int, device):
    """Greedy continuation through the cached path: prefill, then one token per call."""
    import torch

    ids = tok.encode(prompt).ids
    model.model.engram_hash_state.history = None
    cache = mf.fresh_cache(modeling, model.config)
    out = []
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids], device=device), past_key_values=cache, use_cache=True).logits
        for _ in range(max_tokens):
            nxt = int(logits[0, -1].argmax())
            if nxt == 1:
                break
            out.append(nxt)
            logits = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=cache, use_cache=True).logits
    return ids, out, tok.decode(out, skip_special_tokens=False)


def load_released(model_dir: Path, overlay):
    """HF model holding exactly the dequantized values of a released-format checkpoint."""
    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    modeling, configuration = mf.import_reference(overlay)
    composite = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    model = build_model(modeling, configuration, composite).eval()
    index = json.loads((model_dir / "model.safetensors.index.json").read_text())
    tensors = {}
    for f in sorted(set(index["weight_map"].values())):
        tensors.update(load_file(str(model_dir / f)))
    sd = {}
    for r in tensors:
        if r.endswith(".scale"):
            if r.endswith("engram.embed.scale"):
                sd[mf.hf_name_of(r)] = torch.ones(tuple(tensors[r].shape))
            continue
        sd[mf.hf_name_of(r)] = torch.from_numpy(mf.np_dequant(r, tensors).astype(np.float32))
    model.load_state_dict(sd, strict=True)
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    model.model.bind_tokenizer(mf.wrap_tokenizer(tok))
    return model, modeling, tok


# --------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------
def cmd_train(args):
    import torch

    t_start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mdir = out / args.name
    mdir.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    report = {"args": vars(args), "torch": torch.__version__}
    import transformers

    report["transformers"] = transformers.__version__

    # 1. corpus and tokenizer
    train_docs, held_docs, cstats = collect_corpus(int(args.corpus_mb * 1e6), int(args.heldout_kb * 1e3))
    report["corpus"] = cstats
    log(f"[{time.time() - t_start:6.1f}s] corpus: {json.dumps(cstats)}")
    tok_docs, acc = [], 0
    for _, t in train_docs:
        if acc >= args.tokenizer_mb * 1e6:
            break
        tok_docs.append(t)
        acc += len(t)
    tok = build_tokenizer(tok_docs, args.vocab)
    V = tok.get_vocab_size()
    log(f"[{time.time() - t_start:6.1f}s] tokenizer: {V} tokens from {acc / 1e6:.1f} MB")
    train_ids = encode_docs(tok, [t for _, t in train_docs])
    heldout_text = "\n\n".join(t for _, t in held_docs)
    (out / "heldout.txt").write_text(heldout_text, encoding="utf-8")
    held_ids = np.asarray(tok.encode(heldout_text).ids, dtype=np.int64)
    report["train_tokens"] = int(train_ids.size)
    report["heldout_tokens"] = int(held_ids.size)
    report["heldout_files"] = [r for r, _ in held_docs]
    log(f"[{time.time() - t_start:6.1f}s] train tokens {train_ids.size}, held-out tokens {held_ids.size}")

    # 2. model
    modeling, configuration = mf.import_reference(Path(args.overlay) if args.overlay else None)
    hf_tok = mf.wrap_tokenizer(tok)
    text = mf.complete_text_config(modeling, configuration, text_config_dict(V, args.seq), hf_tok)
    composite = composite_config(text)
    torch.manual_seed(args.seed)
    model = build_model(modeling, configuration, composite)
    model.model.bind_tokenizer(hf_tok)
    cfg = model.config
    with torch.no_grad():  # only the selection bias; _init_weights zeroes it already
        for layer in model.model.layers:
            layer.ffn.gate.bias.zero_()
            layer.ffn.gate.bias_vl.zero_()
    model.to(device).train()
    n_params = sum(p.numel() for n, p in model.named_parameters() if not n.endswith("engram.embed.scale"))
    report["parameters"] = n_params
    log(f"[{time.time() - t_start:6.1f}s] model: {n_params / 1e6:.2f} M parameters on {device}")

    restore_ste = install_ste(modeling)
    probes = Probes(model, modeling)
    qat = QAT(model)
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if n.endswith(("gate.bias", "gate.bias_vl", "engram.embed.scale")):
            p.requires_grad_(False)
            continue
        (decay if p.dim() >= 2 and "hc_" not in n else no_decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda",
    )
    indexers = [model.model.layers[i].attn.indexer for i in cfg.index_source_layer_ids]

    def set_dense(dense: bool):
        for ind in indexers:
            ind.index_topk = 1 << 30 if dense else cfg.index_topk
            ind.candidate_topk_blocks = 1 << 30 if dense else cfg.candidate_topk_blocks

    rng = np.random.default_rng(args.seed)
    S, B = args.seq, args.batch
    held_t = torch.as_tensor(held_ids)

    def get_batch():
        starts = rng.integers(0, train_ids.size - S - 1, size=B)
        w = np.stack([train_ids[s : s + S + 1] for s in starts]).astype(np.int64)
        w = torch.from_numpy(w).to(device, non_blocking=True)
        return w[:, :-1], w[:, 1:]

    def val_loss(n_win=8):
        probes.enabled = False
        model.eval()
        wins = ppl_windows(len(held_ids), S, S)[:n_win]
        x = torch.stack([held_t[b:e] for b, e, _ in wins if e - b == S]).to(device)
        logits = forward_fresh(model, modeling, x)
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1))
        model.train()
        probes.enabled = True
        return float(loss)

    # 3. training; the step count is sized to the time budget after a probe
    total = args.steps
    deadline = t_start + args.train_until_s
    warm = args.warmup
    curve = []
    step, t_train = 0, time.time()
    t_probe0 = None
    max_load = 0.0
    while True:
        if total and step >= total:
            break
        if time.time() > deadline:
            log(f"!! deadline reached at step {step}")
            break
        if step == 3:
            if device.type == "cuda":
                torch.cuda.synchronize()
            t_probe0 = time.time()
        if step == 13 and not args.steps:
            if device.type == "cuda":
                torch.cuda.synchronize()
            dt = (time.time() - t_probe0) / 10 * 1.08  # QAT / sparse phase overhead margin
            remaining = deadline - time.time()
            total = 13 + int(remaining / dt)
            log(f"   probe: {dt * 1000:.0f} ms/step -> {total} steps")
            report["probe_ms_per_step"] = dt * 1000
        T = total or 10**9
        dense = step < args.dense_frac * T
        set_dense(dense)
        use_qat = step >= args.qat_frac * T
        if step < warm:
            lr = args.lr * (step + 1) / warm
        else:
            prog = min(1.0, (step - warm) / max(1, T - warm))
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog)))
        for g in opt.param_groups:
            g["lr"] = lr
        if use_qat:
            qat.swap_in()
        x, y = get_batch()
        probes.clear()
        logits = forward_fresh(model, modeling, x, grad=True)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        aux = probes.indexer_loss()
        (loss + args.aux_weight * aux).backward()
        if use_qat:
            qat.swap_out()
        gn = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        load = update_router_bias(model, probes, args.bias_rate)
        probes.clear()
        if step % args.log_every == 0 or step == T - 1:
            rec = {"step": step, "loss": round(float(loss.detach()), 4), "aux": round(float(aux.detach()) if torch.is_tensor(aux) else float(aux), 4), "lr": lr,
                   "gnorm": round(float(gn), 3), "max_load": round(load, 2), "dense": dense, "qat": use_qat,
                   "t": round(time.time() - t_train, 1)}
            if step % args.val_every == 0 or step == T - 1:
                rec["val"] = round(val_loss(), 4)
            if device.type == "cuda":
                rec["mem_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
            curve.append(rec)
            log(json.dumps(rec))
        step += 1
    if device.type == "cuda":
        torch.cuda.synchronize()
    report["steps"] = step
    report["train_seconds"] = time.time() - t_train
    report["tokens_seen"] = step * B * S
    report["curve"] = curve
    set_dense(False)
    probes.enabled = False
    for h in probes.handles:
        h.remove()
    restore_ste()
    log(f"[{time.time() - t_start:6.1f}s] trained {step} steps, {step * B * S / 1e6:.1f} M tokens")

    # 4. export (released format) and reload exactly the exported values
    model.eval().cpu()
    released, hf_sd = mf.to_released(model)
    (mdir / "config.json").write_text(json.dumps(composite, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    mf.write_sharded(released, mdir)
    mf.save_tokenizer(tok, mdir)
    model.load_state_dict(hf_sd, strict=True)
    sizes = {p.name: p.stat().st_size for p in sorted(mdir.iterdir())}
    report["export_bytes"] = sizes
    report["export_total_mb"] = sum(sizes.values()) / 1e6
    log(f"[{time.time() - t_start:6.1f}s] exported {report['export_total_mb']:.1f} MB to {mdir}")

    # 5. reference perplexity of the exported weights (fp32, no TF32), greedy sample
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model.to(device)
    count, nll = reference_ppl(model, modeling, held_ids.tolist(), args.eval_context, args.eval_context, 8, device)
    report["reference_eval"] = {"context": args.eval_context, "stride": args.eval_context, "tokens": count,
                                "nll": nll / count, "ppl": math.exp(nll / count), "device": str(device)}
    log(f"[{time.time() - t_start:6.1f}s] reference eval: {json.dumps(report['reference_eval'])}")
    ids, gen, gen_text = greedy(model, modeling, tok, args.prompt, args.sample_tokens, device)
    report["sample"] = {"prompt": args.prompt, "prompt_ids": ids, "ids": gen, "text": gen_text}
    log(f"[{time.time() - t_start:6.1f}s] sample: {args.prompt!r} -> {gen_text!r}")
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def cmd_eval(args):
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, modeling, tok = load_released(Path(args.model), Path(args.overlay) if args.overlay else None)
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    model.to(device)
    ids = tok.encode(Path(args.text).read_text(encoding="utf-8")).ids
    stride = args.stride or args.context
    count, nll = reference_ppl(model, modeling, ids, args.context, stride, args.batch, device)
    print(json.dumps({"tokens": count, "nll": nll / count, "ppl": math.exp(nll / count), "nll_sum": nll,
                      "windows": len(ppl_windows(len(ids), args.context, stride)), "context": args.context,
                      "stride": stride, "text_tokens": len(ids)}))


def cmd_sample(args):
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, modeling, tok = load_released(Path(args.model), Path(args.overlay) if args.overlay else None)
    ids, gen, text = greedy(model, modeling, tok, args.prompt, args.max_tokens, torch.device("cpu"))
    print(json.dumps({"prompt_ids": ids, "ids": gen, "text": text}, ensure_ascii=False))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--overlay", default=str(REPO / ".ref" / "deepseek_v41"),
                    help="directory holding transformers' deepseek_v41 sources ('' = installed package)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", required=True)
    t.add_argument("--name", default="deepinfer-v41-tiny")
    t.add_argument("--device", default="auto")
    t.add_argument("--seed", type=int, default=41)
    t.add_argument("--corpus-mb", type=float, default=80.0, help="training text (MB of characters)")
    t.add_argument("--heldout-kb", type=float, default=48.0, help="held-out text (kB of characters)")
    t.add_argument("--tokenizer-mb", type=float, default=16.0, help="text the BPE is trained on")
    t.add_argument("--vocab", type=int, default=8192)
    t.add_argument("--seq", type=int, default=512)
    t.add_argument("--batch", type=int, default=48)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--wd", type=float, default=0.1)
    t.add_argument("--clip", type=float, default=1.0)
    t.add_argument("--warmup", type=int, default=60)
    t.add_argument("--steps", type=int, default=0, help="0: sized to --train-until-s after a 10-step probe")
    t.add_argument("--train-until-s", type=float, default=450.0, help="training stops this long after start")
    t.add_argument("--dense-frac", type=float, default=0.2, help="first fraction: indexer top-k = everything")
    t.add_argument("--qat-frac", type=float, default=0.3, help="weight fake quantization from this fraction on")
    t.add_argument("--aux-weight", type=float, default=1.0, help="indexer distillation loss weight")
    t.add_argument("--bias-rate", type=float, default=1e-3, help="router balancing bias update")
    t.add_argument("--log-every", type=int, default=25)
    t.add_argument("--val-every", type=int, default=100)
    t.add_argument("--eval-context", type=int, default=512)
    t.add_argument("--prompt", default="def fibonacci(n):")
    t.add_argument("--sample-tokens", type=int, default=64)
    e = sub.add_parser("eval")
    e.add_argument("--model", required=True)
    e.add_argument("--text", required=True)
    e.add_argument("--context", type=int, default=512)
    e.add_argument("--stride", type=int, default=0)
    e.add_argument("--batch", type=int, default=4)
    e.add_argument("--device", default="cpu")
    s = sub.add_parser("sample")
    s.add_argument("--model", required=True)
    s.add_argument("--prompt", default="def fibonacci(n):")
    s.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    {"train": cmd_train, "eval": cmd_eval, "sample": cmd_sample}[args.cmd](args)


if __name__ == "__main__":
    main()
