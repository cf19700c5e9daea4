#!/usr/bin/python3
"""tests/hf_reference.py CADENZA [--backend cuda] - `cadenza generate` on Hugging Face checkpoints against an
independent NumPy implementation of the transformers forward pass.

Writes tiny checkpoints in the real format (config.json + model.safetensors, or shards with
model.safetensors.index.json) with F32, BF16 and F16 tensors:
  llama-f32       LlamaForCausalLM, llama3 rope_scaling, untied head, F32
  qwen2-bf16      Qwen2ForCausalLM, q/k/v biases, tied embeddings, BF16, two shards
  qwen3-f16       Qwen3ForCausalLM, per-head q/k RMSNorm, head_dim != hidden / heads,
                  linear rope_scaling, F16
  qwen3moe-mixed  Qwen3MoeForCausalLM, 8 experts top 2 (norm_topk_prob), BF16 with some
                  experts in F16 and norms in F32
then runs `cadenza generate --model DIR --tokens ... --max-tokens N --json --logits x.npy`
and compares with greedy generation by the reference (float64 over the same stored weight
values, which the engine widens exactly):
  - the generated ids are identical;
  - every generated position's logits agree: max |engine - reference| <= 1e-4 x the RMS of
    the reference logits (the engine computes in float32 with a float32 KV cache; the
    observed error is about 2e-6 of the scale).
Also checks that a checkpoint with a wrong shape or a missing tensor fails with exit
status 2 and a message naming the file, the tensor and the expected shape.

With --backend cuda the checkpoints run on the CUDA backend, held to the same tolerance (the
prompts are short enough for the float32-accumulating GEMV path; docs/kernels.md).

Exit 0 on success, 1 on a mismatch, 77 (skipped) when NumPy or the backend is missing.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("hf_reference: NumPy is missing; skipped")
    sys.exit(77)

TOL = 1e-4
BACKEND = []  # extra `cadenza generate` flags: ["--backend", "cuda"] for the CUDA backend

# ---- safetensors writing -------------------------------------------------------------------


def to_bf16_bits(a):
    """float32 array -> uint16 bfloat16 bits, round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def quantize(a, dtype):
    """(stored bytes, the float64 values they hold)."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.tobytes(), a.astype(np.float64)
    if dtype == "F16":
        h = a.astype(np.float16)
        return h.tobytes(), h.astype(np.float64)
    b = to_bf16_bits(a)
    return b.tobytes(), from_bf16_bits(b).astype(np.float64)


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, off = {}, 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, data in tensors:
            f.write(data)


# ---- tiny models -------------------------------------------------------------------------------


class Model:
    """A checkpoint being written: its config, its tensors (as stored) and their values."""

    def __init__(self, cfg, seed):
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.tensors = []  # (name, dtype, shape, bytes)
        self.w = {}        # name -> float64 values as stored

    def add(self, name, a, dtype):
        data, vals = quantize(a, dtype)
        self.tensors.append((name, dtype, a.shape, data))
        self.w[name] = vals.reshape(a.shape)

    def linear(self, name, out, inp, dtype):
        self.add(name, self.rng.standard_normal((out, inp)) / np.sqrt(inp), dtype)

    def norm(self, name, n, dtype):
        self.add(name, 1.0 + 0.2 * self.rng.standard_normal(n), dtype)

    def bias(self, name, n, dtype):
        self.add(name, 0.5 * self.rng.standard_normal(n), dtype)


def build(cfg, seed, dt, dt_of=None):
    """Draws every tensor of the architecture in cfg; dt_of(name) overrides the dtype."""
    m = Model(cfg, seed)
    pick = (lambda n: dt_of(n) or dt) if dt_of else (lambda n: dt)
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", H // nh)
    arch = cfg["architectures"][0]
    m.add("model.embed_tokens.weight", m.rng.standard_normal((V, H)) / np.sqrt(H),
          pick("model.embed_tokens.weight"))
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        m.norm(p + "input_layernorm.weight", H, pick(p + "input_layernorm.weight"))
        n2 = p + "post_attention_layernorm.weight"
        m.norm(n2, H, pick(n2))
        for proj, out in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
            n = p + f"self_attn.{proj}_proj.weight"
            m.linear(n, out, H, pick(n))
            if arch == "Qwen2ForCausalLM":
                m.bias(p + f"self_attn.{proj}_proj.bias", out, pick(n))
        m.linear(p + "self_attn.o_proj.weight", H, nh * hd, pick(p + "self_attn.o_proj.weight"))
        if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
            m.norm(p + "self_attn.q_norm.weight", hd, pick(p + "self_attn.q_norm.weight"))
            m.norm(p + "self_attn.k_norm.weight", hd, pick(p + "self_attn.k_norm.weight"))
        if arch == "Qwen3MoeForCausalLM":
            E, I = cfg["num_experts"], cfg["moe_intermediate_size"]
            m.linear(p + "mlp.gate.weight", E, H, pick(p + "mlp.gate.weight"))
            for e in range(E):
                q = p + f"mlp.experts.{e}."
                m.linear(q + "gate_proj.weight", I, H, pick(q + "gate_proj.weight"))
                m.linear(q + "up_proj.weight", I, H, pick(q + "up_proj.weight"))
                m.linear(q + "down_proj.weight", H, I, pick(q + "down_proj.weight"))
        else:
            I = cfg["intermediate_size"]
            m.linear(p + "mlp.gate_proj.weight", I, H, pick(p + "mlp.gate_proj.weight"))
            m.linear(p + "mlp.up_proj.weight", I, H, pick(p + "mlp.up_proj.weight"))
            m.linear(p + "mlp.down_proj.weight", H, I, pick(p + "mlp.down_proj.weight"))
    m.norm("model.norm.weight", H, pick("model.norm.weight"))
    if not cfg.get("tie_word_embeddings", False):
        m.linear("lm_head.weight", V, H, pick("lm_head.weight"))
    return m


def save(m, folder, shards=1):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(m.cfg, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), m.tensors)
        return
    per = (len(m.tensors) + shards - 1) // shards
    wmap = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = m.tensors[s * per:(s + 1) * per]
        write_safetensors(os.path.join(folder, fname), part)
        for t in part:
            wmap[t[0]] = fname
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(len(t[3]) for t in m.tensors)},
                   "weight_map": wmap}, f, indent=2)


# ---- the reference forward pass (transformers' modeling_llama / qwen2 / qwen3 / qwen3_moe) ----


def inv_freq(cfg, hd):
    """transformers' modeling_rope_utils, in float32 as torch computes it."""
    f32 = np.float32
    base = f32(cfg.get("rope_theta", 10000.0))
    inv = f32(1.0) / (base ** (np.arange(0, hd, 2).astype(f32) / f32(hd)))
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    factor = f32(rs["factor"])
    if kind == "linear":
        return inv / factor
    assert kind == "llama3"
    lo, hi = f32(rs["low_freq_factor"]), f32(rs["high_freq_factor"])
    old = f32(rs["original_max_position_embeddings"])
    lo_wl, hi_wl = old / lo, old / hi
    wl = f32(2 * np.pi) / inv
    out = np.where(wl > lo_wl, inv / factor, inv)
    smooth = (old / wl - lo) / (hi - lo)
    smoothed = (f32(1) - smooth) * out / factor + smooth * out
    medium = ~(wl < hi_wl) & ~(wl > lo_wl)
    return np.where(medium, smoothed, out).astype(f32)


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x, pos, inv):
    """x (T, heads, hd), rotate-half."""
    ang = (pos.astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)[:, None, :]
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def silu(x):
    return x / (1.0 + np.exp(-x))


def forward(m, tokens):
    """Logits (T, vocab) of every position of `tokens`."""
    cfg, w = m.cfg, m.w
    H = cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", H // nh)
    eps = cfg.get("rms_norm_eps", 1e-6)
    arch = cfg["architectures"][0]
    inv = inv_freq(cfg, hd)
    T = len(tokens)
    pos = np.arange(T)
    x = w["model.embed_tokens.weight"][np.array(tokens)]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"], eps)

        def proj(name):
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            b = p + f"self_attn.{name}_proj.bias"
            return y + w[b] if b in w else y

        q = proj("q").reshape(T, nh, hd)
        k = proj("k").reshape(T, nkv, hd)
        v = proj("v").reshape(T, nkv, hd)
        if p + "self_attn.q_norm.weight" in w:
            q = rms(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, pos, inv), rope(k, pos, inv)
        g = nh // nkv
        out = np.empty((T, nh, hd))
        for head in range(nh):
            s = q[:, head, :] @ k[:, head // g, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            out[:, head, :] = (s / s.sum(-1, keepdims=True)) @ v[:, head // g, :]
        x = x + out.reshape(T, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        if arch == "Qwen3MoeForCausalLM":
            E, K = cfg["num_experts"], cfg["num_experts_per_tok"]
            logits = h @ w[p + "mlp.gate.weight"].T
            pr = np.exp(logits - logits.max(-1, keepdims=True))
            pr /= pr.sum(-1, keepdims=True)
            y = np.zeros_like(h)
            for t in range(T):
                top = np.argsort(-pr[t], kind="stable")[:K]
                wt = pr[t, top]
                if cfg.get("norm_topk_prob", False):
                    wt = wt / wt.sum()
                for e, we in zip(top, wt):
                    q_ = p + f"mlp.experts.{e}."
                    a = (silu(h[t] @ w[q_ + "gate_proj.weight"].T) *
                         (h[t] @ w[q_ + "up_proj.weight"].T))
                    y[t] += we * (a @ w[q_ + "down_proj.weight"].T)
        else:
            a = silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
            y = a @ w[p + "mlp.down_proj.weight"].T
        x = x + y
    x = rms(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


def generate(m, prompt, n):
    toks, out = list(prompt), []
    for _ in range(n):
        lg = forward(m, toks)[-1]
        out.append(lg)
        toks.append(int(np.argmax(lg)))
    return toks[len(prompt):], np.array(out)


# ---- the checks --------------------------------------------------------------------------------


def llama_cfg():
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
            "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 384, "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
            "attention_bias": False, "mlp_bias": False, "max_position_embeddings": 512,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
            "torch_dtype": "float32"}


def qwen2_cfg():
    return {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 96,
            "intermediate_size": 224, "num_hidden_layers": 2, "num_attention_heads": 6,
            "num_key_value_heads": 2, "vocab_size": 320, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": True,
            "use_sliding_window": False, "torch_dtype": "bfloat16"}


def qwen3_cfg():
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4,
            "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 300, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": False,
            "attention_bias": False, "rope_scaling": {"type": "linear", "factor": 2.0},
            "torch_dtype": "float16"}


def qwen3moe_cfg():
    return {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
            "hidden_size": 64, "intermediate_size": 256, "moe_intermediate_size": 48,
            "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True,
            "decoder_sparse_step": 1, "mlp_only_layers": [], "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "vocab_size": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
            "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def moe_dtypes(name):
    if name.endswith("layernorm.weight") or name == "model.norm.weight":
        return "F32"
    if ".experts.3." in name or ".experts.6." in name:
        return "F16"
    return None


failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def run_generate(cz, folder, prompt, n, logits):
    cmd = [cz, "generate", "--model", folder, "--tokens", ",".join(map(str, prompt)),
           "--max-tokens", str(n), "--json", "--logits", logits, "--threads", "2"] + BACKEND
    return subprocess.run(cmd, capture_output=True, text=True)


def check_model(cz, tmp, name, m, shards, prompt, n):
    folder = os.path.join(tmp, name)
    save(m, folder, shards)
    npy = os.path.join(tmp, name + ".npy")
    r = run_generate(cz, folder, prompt, n, npy)
    if r.returncode != 0:
        fail(f"{name}: cadenza generate exited {r.returncode}: {r.stderr.strip()}")
        return
    got = json.loads(r.stdout)["tokens"]
    logits = np.load(npy)
    want, ref = generate(m, prompt, n)
    if got != want:
        fail(f"{name}: ids {got}, reference {want}")
        return
    if logits.shape != ref.shape or logits.dtype != np.float32:
        fail(f"{name}: logits {logits.shape} {logits.dtype}, expected {ref.shape} float32")
        return
    scale = np.sqrt((ref * ref).mean())
    err = np.abs(logits - ref).max()
    ok = err <= TOL * scale
    print(f"{'ok' if ok else 'FAIL'}: {name}: ids {got}; max |logit diff| {err:.3g} "
          f"(logit RMS {scale:.3g}, ratio {err / scale:.2g}, tolerance {TOL:g})")
    if not ok:
        fail(f"{name}: logits differ by {err:.3g} (RMS {scale:.3g})")


def check_errors(cz, tmp):
    cfg = llama_cfg()
    m = build(cfg, 5, "F32")
    # a wrong shape: k_proj of layer 1 with the wrong number of rows
    bad = [t if t[0] != "model.layers.1.self_attn.k_proj.weight"
           else (t[0], t[1], (16, 64), np.zeros((16, 64), np.float32).tobytes())
           for t in m.tensors]
    folder = os.path.join(tmp, "bad-shape")
    os.makedirs(folder)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_safetensors(os.path.join(folder, "model.safetensors"), bad)
    r = run_generate(cz, folder, [1, 2], 2, os.path.join(tmp, "bad.npy"))
    want = "tensor 'model.layers.1.self_attn.k_proj.weight': expected shape (32, 64), got (16, 64)"
    if r.returncode != 2 or want not in r.stderr or "model.safetensors" not in r.stderr:
        fail(f"bad shape: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    elif os.path.exists(os.path.join(tmp, "bad.npy")):
        fail("bad shape: a logits file was left behind")
    else:
        print("ok: wrong shape:", r.stderr.strip())
    # a missing tensor
    folder = os.path.join(tmp, "missing")
    os.makedirs(folder)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_safetensors(os.path.join(folder, "model.safetensors"),
                      [t for t in m.tensors if t[0] != "lm_head.weight"])
    r = run_generate(cz, folder, [1, 2], 2, os.path.join(tmp, "missing.npy"))
    want = "no tensor 'lm_head.weight' (expected shape (384, 64))"
    if r.returncode != 2 or want not in r.stderr:
        fail(f"missing tensor: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    else:
        print("ok: missing tensor:", r.stderr.strip())

    def folder_with(name, tensors, config=cfg):
        folder = os.path.join(tmp, name)
        os.makedirs(folder)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        if tensors is not None:
            write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        return folder

    def expect(what, folder, code, want, timeout=60):
        try:
            r = subprocess.run([cz, "generate", "--model", folder, "--tokens", "1,2",
                                "--max-tokens", "3", "--threads", "1"],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            fail(f"{what}: no answer within {timeout} s (a hang)")
            return
        if r.returncode != code or want not in r.stderr:
            fail(f"{what}: exit {r.returncode}, stderr {r.stderr.strip()!r}, expected exit "
                 f"{code} with {want!r}")
        else:
            print(f"ok: {what}:", r.stderr.strip())

    # a tensor the model does not read, and a layer past config.json's count
    extra = m.tensors + [("model.extra.weight", "F32", (2,), np.zeros(2, np.float32).tobytes())]
    expect("an extra tensor", folder_with("extra", extra), 2,
           "tensor 'model.extra.weight' is not a weight of the model")
    L = cfg["num_hidden_layers"]
    more = m.tensors + [(t[0].replace("layers.0.", f"layers.{L}."),) + tuple(t[1:])
                        for t in m.tensors if t[0].startswith("model.layers.0.")]
    expect("more layers than config.json", folder_with("more-layers", more), 2,
           f"layer {L}, but config.json declares {L} layers")
    # HF's rotary tables are let be
    rot = m.tensors + [("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", (8,),
                        np.ones(8, np.float32).tobytes())]
    expect("a rotary table beside the weights", folder_with("rotary", rot), 0, "")
    # non-finite weights, and finite ones whose logits overflow
    nan = [t if t[0] != "model.norm.weight"
           else (t[0], t[1], t[2], np.full(t[2], np.nan, np.float32).tobytes()) for t in m.tensors]
    expect("NaN weights", folder_with("nan", nan), 2,
           "tensor 'model.norm.weight': holds NaN or infinite values")
    big = [t if t[0] != "lm_head.weight"
           else (t[0], t[1], t[2], np.full(t[2], 3e38, np.float32).tobytes()) for t in m.tensors]
    expect("logits that overflow", folder_with("overflow", big), 2,
           "the logits at position 2 hold NaN or +inf")
    # what is not a regular file
    f = folder_with("fifo", None)
    os.mkfifo(os.path.join(f, "model.safetensors"))
    expect("a FIFO for model.safetensors", f, 2, "not a regular file (a FIFO)", timeout=20)
    f = folder_with("dir", None)
    os.makedirs(os.path.join(f, "model.safetensors"))
    expect("a folder for model.safetensors", f, 2, "not a regular file (a folder)")
    f = folder_with("cfg-fifo", m.tensors)
    os.remove(os.path.join(f, "config.json"))
    os.mkfifo(os.path.join(f, "config.json"))
    expect("a FIFO for config.json", f, 2, "config.json: not a regular file", timeout=20)


def main():
    if len(sys.argv) == 4 and sys.argv[2] == "--backend" and sys.argv[3] in ("cpu", "cuda"):
        BACKEND.extend(sys.argv[2:])
    elif len(sys.argv) != 2:
        print(__doc__)
        return 2
    cz = os.path.abspath(sys.argv[1])
    if BACKEND:
        r = subprocess.run([cz, "generate", "--model", "tiny-llama", "--tokens", "1",
                            "--max-tokens", "1"] + BACKEND, capture_output=True, text=True)
        if r.returncode == 1 and "backend '" in r.stderr:
            print(f"hf_reference: {r.stderr.strip()}; skipped")
            return 77
    with tempfile.TemporaryDirectory() as tmp:
        check_model(cz, tmp, "llama-f32", build(llama_cfg(), 1, "F32"), 1, [3, 141, 59, 26, 5], 10)
        check_model(cz, tmp, "qwen2-bf16", build(qwen2_cfg(), 7, "BF16"), 2, [7, 1, 300, 42], 8)
        check_model(cz, tmp, "qwen3-f16", build(qwen3_cfg(), 3, "F16"), 1, [11, 22, 33], 8)
        check_model(cz, tmp, "qwen3moe-mixed", build(qwen3moe_cfg(), 4, "BF16", moe_dtypes), 1,
                    [200, 17, 99, 4, 250, 1], 8)
        check_errors(cz, tmp)
    if failures:
        print(f"{len(failures)} failed")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
