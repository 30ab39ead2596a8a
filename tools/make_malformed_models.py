#!/usr/bin/env python3
"""make_malformed_models.py - writes the malformed-model fixtures of tests/data/malformed/: each is a
valid micro model with exactly one defect, so the test can require a clean error naming the file and
the field or tensor. Python standard library only; deterministic.

Usage: python3 tools/make_malformed_models.py [outdir]   (default: tests/data/malformed next to tools/)

Valid bases (the test checks they open, so each defect is the only one):
  base/        micro CTC model in HF layout (d_model 8, 1 layer, ff 16, kernel 3, 4 channels, 8 mels)
  base.gguf    the same model in vkasr's canonical GGUF layout, written by this script's own GGUF
               writer and canonical transform (an implementation independent of the C one)
HF directories (copies of base/ with one file changed): st_* (safetensors), config_*, tokenizer_*,
index_*, wrong_shape, missing_tensor. GGUF files: gguf_*.gguf.
"""
import copy
import json
import math
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_model as tiny  # noqa: E402

MICRO = dict(d=8, layers=1, heads=2, ff=16, kernel=3, channels=4, mels=8, vocab=20, head="ctc",
             attention_bias=True, conv_bias=True, xscaling=True, seed=7)

# ---------------------------------------------------------------------------------------------------
# canonical transform (see src/model/model_types.h, docs/model-format.md), in double like the C code


def canonical(cfg, t):
    """HF tensors (name -> (shape, values)) -> list of (name, shape, values) in vkasr's kernel layout."""
    out = []
    C, F, D, K = cfg["channels"], cfg["mels"] // 8, cfg["d"], cfg["kernel"]

    def keep(name, shape=None):
        s, v = t[name]
        out.append((name, shape or s, list(v)))

    for i in (0, 2, 3, 5, 6):
        keep("encoder.subsampling.layers.%d.weight" % i, [C, 9] if i in (0, 2, 5) else [C, C])
        keep("encoder.subsampling.layers.%d.bias" % i)
    w = t["encoder.subsampling.linear.weight"][1]
    perm = [0.0] * len(w)
    for d in range(D):
        for f in range(F):
            for c in range(C):
                perm[d * F * C + f * C + c] = w[d * C * F + c * F + f]
    out.append(("encoder.subsampling.linear.weight", [D, F * C], perm))
    keep("encoder.subsampling.linear.bias")
    for l in range(cfg["layers"]):
        p = "encoder.layers.%d." % l
        for n in ("feed_forward1.linear1.weight", "feed_forward1.linear1.bias", "feed_forward1.linear2.weight",
                  "feed_forward1.linear2.bias", "norm_feed_forward1.weight", "norm_feed_forward1.bias"):
            keep(p + n)
        for q in "qkvo":
            keep(p + "self_attn.%s_proj.weight" % q)
            keep(p + "self_attn.%s_proj.bias" % q)
        for n in ("self_attn.relative_k_proj.weight", "self_attn.bias_u", "self_attn.bias_v",
                  "norm_self_att.weight", "norm_self_att.bias"):
            keep(p + n)
        keep(p + "conv.pointwise_conv1.weight", [2 * D, D])
        keep(p + "conv.pointwise_conv1.bias")
        dw = t[p + "conv.depthwise_conv.weight"][1]
        db = t[p + "conv.depthwise_conv.bias"][1]
        g, b = t[p + "conv.norm.weight"][1], t[p + "conv.norm.bias"][1]
        mu, var = t[p + "conv.norm.running_mean"][1], t[p + "conv.norm.running_var"][1]
        fw, fb = [], []
        for c in range(D):
            s = g[c] / math.sqrt(var[c] + 1e-5)
            fw += [tiny.f32(dw[c * K + k] * s) for k in range(K)]
            fb.append(tiny.f32((db[c] - mu[c]) * s + b[c]))
        out.append((p + "conv.depthwise_conv.weight", [D, K], fw))
        out.append((p + "conv.depthwise_conv.bias", [D], fb))
        keep(p + "conv.pointwise_conv2.weight", [D, D])
        for n in ("conv.pointwise_conv2.bias", "norm_conv.weight", "norm_conv.bias", "feed_forward2.linear1.weight",
                  "feed_forward2.linear1.bias", "feed_forward2.linear2.weight", "feed_forward2.linear2.bias",
                  "norm_feed_forward2.weight", "norm_feed_forward2.bias", "norm_out.weight", "norm_out.bias"):
            keep(p + n)
    keep("ctc_head.weight", [cfg["vocab"] + 1, D])
    keep("ctc_head.bias")
    return out


# ---------------------------------------------------------------------------------------------------
# GGUF writer

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return u64(len(b)) + b


def gvalue(t, v):
    if t == U32:
        return u32(v)
    if t == I32:
        return struct.pack("<i", v)
    if t == F32:
        return struct.pack("<f", v)
    if t == BOOL:
        return bytes([1 if v else 0])
    if t == STR:
        return gstr(v)
    if t == ARR:
        at, items = v
        return u32(at) + u64(len(items)) + b"".join(gvalue(at, x) for x in items)
    raise ValueError(t)


def gguf_kvs(cfg):
    pieces, types = tiny.pieces_for(cfg["head"])
    return [
        ("general.architecture", STR, "parakeet"),
        ("general.name", STR, "micro"),
        ("general.alignment", U32, 32),
        ("vkasr.layout_version", U32, 1),
        ("parakeet.head", STR, cfg["head"]),
        ("parakeet.d_model", U32, cfg["d"]),
        ("parakeet.n_layers", U32, cfg["layers"]),
        ("parakeet.n_heads", U32, cfg["heads"]),
        ("parakeet.ff_size", U32, cfg["ff"]),
        ("parakeet.conv_kernel", U32, cfg["kernel"]),
        ("parakeet.n_mels", U32, cfg["mels"]),
        ("parakeet.subsampling_channels", U32, cfg["channels"]),
        ("parakeet.subsampling_factor", U32, 8),
        ("parakeet.xscaling", BOOL, cfg["xscaling"]),
        ("parakeet.attention_bias", BOOL, cfg["attention_bias"]),
        ("parakeet.conv_bias", BOOL, cfg["conv_bias"]),
        ("parakeet.att_context_left", I32, -1),
        ("parakeet.att_context_right", I32, -1),
        ("parakeet.vocab_size", U32, cfg["vocab"]),
        ("parakeet.pred_hidden", U32, 0),
        ("parakeet.pred_layers", U32, 0),
        ("parakeet.durations", ARR, (I32, [])),
        ("parakeet.max_symbols_per_step", U32, 0),
        ("parakeet.sample_rate", U32, 16000),
        ("parakeet.n_fft", U32, 512),
        ("parakeet.win_length", U32, 400),
        ("parakeet.hop_length", U32, 160),
        ("parakeet.preemphasis", F32, 0.97),
        ("tokenizer.ggml.model", STR, "llama"),
        ("tokenizer.ggml.tokens", ARR, (STR, pieces)),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
    ]


def gguf_bytes(kvs, tensors, align=32):
    """tensors: list of (name, PyTorch-order shape, values) stored F32. Returns (bytes, infos) where infos
    holds the byte positions of each tensor info's fields (for corrupting them)."""
    out = bytearray(b"GGUF" + u32(3) + u64(len(tensors)) + u64(len(kvs)))
    for k, t, v in kvs:
        out += gstr(k) + u32(t) + gvalue(t, v)
    infos, off, blobs = [], 0, []
    for name, shape, vals in tensors:
        info = {"name": name, "shape": shape}
        out += gstr(name)
        info["ndim_at"] = len(out)
        out += u32(len(shape))
        info["dims_at"] = len(out)
        for d in reversed(shape):  # GGUF ne[0] is the innermost dimension
            out += u64(d)
        info["type_at"] = len(out)
        out += u32(0)
        info["off_at"] = len(out)
        out += u64(off)
        raw = struct.pack("<%df" % len(vals), *vals)
        raw += b"\0" * ((align - len(raw) % align) % align)
        blobs.append(raw)
        off += len(raw)
        infos.append(info)
    out += b"\0" * ((align - len(out) % align) % align)
    return bytes(out) + b"".join(blobs), infos


# ---------------------------------------------------------------------------------------------------


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "malformed")
    if os.path.isdir(root):
        shutil.rmtree(root)
    os.makedirs(root)
    cfg = MICRO
    tensors = tiny.make_tensors(cfg, cfg["seed"])
    base = os.path.join(root, "base")
    tiny.write_dir(base, cfg, tensors)
    for f in ("tokenizer_config.json",):  # not read by vkasr; keep the fixtures small
        os.remove(os.path.join(base, f))
    st_path = os.path.join(base, "model.safetensors")
    with open(st_path, "rb") as f:
        st = f.read()
    hlen = struct.unpack("<Q", st[:8])[0]
    header = json.loads(st[8:8 + hlen])
    data = st[8 + hlen:]

    def variant(name, files):
        """A copy of base/ with the given files (name -> bytes) replaced (None removes)."""
        d = os.path.join(root, name)
        shutil.copytree(base, d)
        for fn, content in files.items():
            p = os.path.join(d, fn)
            if content is None:
                os.remove(p)
            else:
                with open(p, "wb") as f:
                    f.write(content)

    def st_with(mutate):
        h = copy.deepcopy(header)
        mutate(h)
        return tiny.header_and_data(h, data)

    q = "encoder.layers.0.self_attn.q_proj.weight"
    k = "encoder.layers.0.self_attn.k_proj.weight"
    variant("st_truncated", {"model.safetensors": st[:-100]})
    variant("st_header_too_long", {"model.safetensors": u64(len(st)) + st[8:]})
    variant("st_header_absurd", {"model.safetensors": u64(1 << 63) + st[8:]})
    bad = bytearray(st)
    colon = st.index(b":", 8 + hlen // 2)  # a ':' between a key and its value, outside any string
    bad[colon] = ord("#")  # breaks the JSON in the middle, keeps every length
    variant("st_bad_json", {"model.safetensors": bytes(bad)})

    def out_of_range(h):
        b, e = h[q]["data_offsets"]
        h[q]["data_offsets"] = [len(data) - (e - b) + 64, len(data) + 64]

    def overlap(h):
        h[k]["data_offsets"] = list(h[q]["data_offsets"])

    def wrong_size(h):
        h[q]["shape"] = [8, 7]

    def dtype(h):
        h[q]["dtype"] = "F8_E4M3"

    def shape(h):
        h[q]["shape"] = [4, 16]  # same bytes, wrong shape for the config

    def missing(h):
        del h["encoder.layers.0.norm_out.bias"]

    variant("st_offsets_out_of_range", {"model.safetensors": st_with(out_of_range)})
    variant("st_overlap", {"model.safetensors": st_with(overlap)})
    variant("st_wrong_size", {"model.safetensors": st_with(wrong_size)})
    variant("st_unknown_dtype", {"model.safetensors": st_with(dtype)})
    variant("wrong_shape", {"model.safetensors": st_with(shape)})
    variant("missing_tensor", {"model.safetensors": st_with(missing)})

    # the same name twice in one header (JSON allows it; the second is an empty tensor so nothing overlaps)
    htxt = json.dumps(header, separators=(",", ":"))[:-1]
    htxt += ',"encoder.layers.0.norm_out.bias":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'
    hb = htxt.encode() + b" " * ((8 - len(htxt) % 8) % 8)
    variant("st_duplicate_name", {"model.safetensors": u64(len(hb)) + hb + data})

    conf = tiny.hf_config(cfg)
    conf["encoder_config"]["hidden_size"] = "8"
    variant("config_wrong_type", {"config.json": json.dumps(conf, indent=2).encode()})
    tok = json.dumps(tiny.tokenizer_json("ctc"), indent=2, ensure_ascii=False).encode("utf-8")
    # a raw 0xFF byte inside the piece "at" (id 18): not UTF-8
    tok_bad = tok.replace(b'"at": 18', b'"a\xfft": 18')
    assert tok_bad != tok
    variant("tokenizer_bad_utf8", {"tokenizer.json": tok_bad})
    index = {"metadata": {}, "weight_map": {n: "../base/model.safetensors" for n in header if n != "__metadata__"}}
    variant("index_bad_shard_name", {"model.safetensors": None,
                                     "model.safetensors.index.json": json.dumps(index).encode()})

    # GGUF: a valid canonical file and one defect per copy
    kvs = gguf_kvs(cfg)
    good, infos = gguf_bytes(kvs, canonical(cfg, tensors))

    def gguf(name, content):
        with open(os.path.join(root, name), "wb") as f:
            f.write(content)

    def patch(buf, at, raw):
        b = bytearray(buf)
        b[at:at + len(raw)] = raw
        return bytes(b)

    gguf("base.gguf", good)
    # defects in the first bytes fail before anything later is read: keep only a head of those files
    head = 512
    gguf("gguf_bad_magic.gguf", b"GGUX" + good[4:head])
    gguf("gguf_version_99.gguf", patch(good, 4, u32(99))[:head])
    gguf("gguf_truncated.gguf", good[:2500])  # inside the tensor infos, past the count plausibility checks
    gguf("gguf_tensor_count_2p60.gguf", patch(good, 8, u64(1 << 60))[:head])
    gguf("gguf_string_len_2p40.gguf", patch(good, 24, u64(1 << 40)))  # whole: counts are checked first
    last = infos[-1]
    gguf("gguf_offset_beyond_file.gguf", patch(good, last["off_at"], u64(1 << 20)))
    gguf("gguf_tensor_type_2.gguf", patch(good, infos[0]["type_at"], u32(2)))
    # a block-quantized type (Q8_0, GGML id 8: blocks of 32 weights) on a matrix whose rows have 8
    q_proj = next(i for i in infos if i["name"] == "encoder.layers.0.self_attn.q_proj.weight")
    gguf("gguf_q8_0_row_8.gguf", patch(good, q_proj["type_at"], u32(8)))
    two_d = next(i for i in infos if len(i["shape"]) == 2)
    gguf("gguf_dims_overflow.gguf", patch(good, two_d["dims_at"], u64(1 << 40) + u64(1 << 40)))
    gguf("gguf_duplicate_key.gguf", gguf_bytes(kvs + [("general.name", STR, "again")], canonical(cfg, tensors))[0])
    kv2 = [(k_, t_, 2 if k_ == "vkasr.layout_version" else v_) for k_, t_, v_ in kvs]
    gguf("gguf_layout_version_2.gguf", gguf_bytes(kv2, canonical(cfg, tensors))[0])

    with open(os.path.join(root, "README.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write("# Malformed model fixtures\n\nGenerated by `tools/make_malformed_models.py` (see its docstring); "
                "do not edit by hand.\n`base/` and `base.gguf` are valid; every other entry has exactly one "
                "defect and must\nmake `model_open` fail cleanly (tests/test_model_io.c lists the expected "
                "messages).\n")
    total = 0
    for dp, _, fs in os.walk(root):
        total += sum(os.path.getsize(os.path.join(dp, f)) for f in fs)
    print("%s: %d bytes in %d entries" % (root, total, len(os.listdir(root))))


if __name__ == "__main__":
    main()
