#!/usr/bin/env python3
"""make_tiny_model.py - writes tiny Hugging Face transformers Parakeet directories (random weights) for
tests and end-to-end development: config.json, model.safetensors, tokenizer.json in the layout
transformers' ParakeetConverter produces, preprocessor_config.json (or processor_config.json with the
feature extractor nested under "feature_extractor"), tokenizer_config.json.

Python standard library only. Deterministic (fixed seeds), so re-running reproduces the committed files.

Usage: python3 tools/make_tiny_model.py [outdir]     (default: tests/data/tiny next to tools/)

Writes tdt/, rnnt/, ctc/ (d_model 16, 2 layers, 2 heads, ff 32, 8 subsampling channels, 16 mels,
20 pieces) and ctc_sharded/ (the ctc weights rounded to f16 and bf16, in two shards with an index).
The heads differ on purpose to cover the configuration space:
  tdt  : attention_bias/convolution_bias false, scale_input false, 2 LSTM layers, durations [0..4],
         <pad> piece at id 2, num_batches_tracked present, preprocessor_config.json
  rnnt : biases true, scale_input true, 1 LSTM layer, "," is a USER_DEFINED piece,
         processor_config.json (nested feature extractor)
  ctc  : attention_bias true, convolution_bias and scale_input missing (transformers' defaults: true)
"""
import json
import math
import os
import random
import struct
import sys

SPACE = "\u2581"

# ---------------------------------------------------------------------------------------------------
# numbers and safetensors


def f32(x):
    """x rounded to the nearest float32 (as a Python float)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def pack(values, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    if dtype == "BF16":
        return struct.pack("<%dH" % len(values), *[bf16_bits(v) for v in values])
    if dtype == "I64":
        return struct.pack("<%dq" % len(values), *[int(v) for v in values])
    raise ValueError(dtype)


DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}


def safetensors_bytes(entries, metadata=None):
    """entries: list of (name, dtype, shape, raw bytes). Returns the file's bytes (header padded to 8)."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    return header_and_data(header, b"".join(blobs))


def header_and_data(header, data):
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


# ---------------------------------------------------------------------------------------------------
# the model


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class ListFill:
    """The tiny models' values: float32-rounded draws of random.Random(seed), in the order the tensors
    are made, as (shape, list of values). make_shaped_model.py passes a numpy one of the same methods."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def normal(self, shape, std, mean=0.0):
        return (shape, [f32(mean + self.rng.gauss(0.0, std)) if mean else f32(self.rng.gauss(0.0, std))
                        for _ in range(numel(shape))])

    def uniform(self, shape, lo, hi):
        return (shape, [f32(self.rng.uniform(lo, hi)) for _ in range(numel(shape))])

    def scalar(self, v):
        return ([], [v])

    def zero_last_row(self, value):
        shape, vals = value
        for i in range(numel(shape) - shape[-1], numel(shape)):
            vals[i] = 0.0


def make_tensors(cfg, seed, fill=None):
    """Ordered dict name -> value in the HF layout for cfg (our own dict); values from fill (default
    ListFill(seed): (shape, list of float32 values))."""
    fill = fill or ListFill(seed)
    t = {}

    def rand(name, shape, std):
        t[name] = fill.normal(shape, std)

    D, L, H, FF, K = cfg["d"], cfg["layers"], cfg["heads"], cfg["ff"], cfg["kernel"]
    C, M, V1 = cfg["channels"], cfg["mels"], cfg["vocab"] + 1
    ab, cb = cfg["attention_bias"], cfg["conv_bias"]
    w = 1.0 / math.sqrt(D)
    rand("encoder.subsampling.layers.0.weight", [C, 1, 3, 3], 0.3)
    rand("encoder.subsampling.layers.0.bias", [C], 0.1)
    for i, j in ((2, 3), (5, 6)):
        rand("encoder.subsampling.layers.%d.weight" % i, [C, 1, 3, 3], 0.3)
        rand("encoder.subsampling.layers.%d.bias" % i, [C], 0.1)
        rand("encoder.subsampling.layers.%d.weight" % j, [C, C, 1, 1], 1.0 / math.sqrt(C))
        rand("encoder.subsampling.layers.%d.bias" % j, [C], 0.1)
    rand("encoder.subsampling.linear.weight", [D, C * (M // 8)], 1.0 / math.sqrt(C * (M // 8)))
    rand("encoder.subsampling.linear.bias", [D], 0.1)
    for l in range(L):
        p = "encoder.layers.%d." % l

        def ff(n):
            rand(p + n + ".linear1.weight", [FF, D], w)
            if ab:
                rand(p + n + ".linear1.bias", [FF], 0.05)
            rand(p + n + ".linear2.weight", [D, FF], 1.0 / math.sqrt(FF))
            if ab:
                rand(p + n + ".linear2.bias", [D], 0.05)

        def norm(n):
            t[p + n + ".weight"] = fill.normal([D], 0.1, mean=1.0)
            rand(p + n + ".bias", [D], 0.05)

        ff("feed_forward1")
        norm("norm_feed_forward1")
        for q in "qkvo":
            rand(p + "self_attn.%s_proj.weight" % q, [D, D], w)
            if ab:
                rand(p + "self_attn.%s_proj.bias" % q, [D], 0.05)
        rand(p + "self_attn.relative_k_proj.weight", [D, D], w)
        rand(p + "self_attn.bias_u", [H, D // H], 0.1)
        rand(p + "self_attn.bias_v", [H, D // H], 0.1)
        norm("norm_self_att")
        rand(p + "conv.pointwise_conv1.weight", [2 * D, D, 1], w)
        if cb:
            rand(p + "conv.pointwise_conv1.bias", [2 * D], 0.05)
        rand(p + "conv.depthwise_conv.weight", [D, 1, K], 1.0 / math.sqrt(K))
        if cb:
            rand(p + "conv.depthwise_conv.bias", [D], 0.05)
        t[p + "conv.norm.weight"] = fill.uniform([D], 0.8, 1.2)
        rand(p + "conv.norm.bias", [D], 0.1)
        rand(p + "conv.norm.running_mean", [D], 0.1)
        t[p + "conv.norm.running_var"] = fill.uniform([D], 0.5, 1.5)
        if cfg.get("num_batches_tracked"):
            t[p + "conv.norm.num_batches_tracked"] = fill.scalar(1234)
        rand(p + "conv.pointwise_conv2.weight", [D, D, 1], w)
        if cb:
            rand(p + "conv.pointwise_conv2.bias", [D], 0.05)
        norm("norm_conv")
        ff("feed_forward2")
        norm("norm_feed_forward2")
        norm("norm_out")
    if cfg["head"] == "ctc":
        rand("ctc_head.weight", [V1, D, 1], w)
        rand("ctc_head.bias", [V1], 0.1)
    else:
        P, NJ = cfg["pred"], V1 + len(cfg.get("durations", []))
        rand("encoder_projector.weight", [P, D], w)
        rand("encoder_projector.bias", [P], 0.05)
        rand("decoder.embedding.weight", [V1, P], 0.5)
        fill.zero_last_row(t["decoder.embedding.weight"])  # padding_idx = blank: the blank row is zero
        for k in range(cfg["pred_layers"]):
            for n in ("weight_ih_l%d", "weight_hh_l%d"):
                rand("decoder.lstm." + n % k, [4 * P, P], 1.0 / math.sqrt(P))
            for n in ("bias_ih_l%d", "bias_hh_l%d"):
                rand("decoder.lstm." + n % k, [4 * P], 0.1)
        rand("decoder.decoder_projector.weight", [P, P], 1.0 / math.sqrt(P))
        rand("decoder.decoder_projector.bias", [P], 0.05)
        rand("joint.head.weight", [NJ, P], 1.0 / math.sqrt(P))
        rand("joint.head.bias", [NJ], 0.1)
    return t


def tensor_entries(tensors, dtype_of=lambda name: "F32"):
    out = []
    for name, (shape, vals) in tensors.items():
        dt = "I64" if name.endswith("num_batches_tracked") else dtype_of(name)
        out.append((name, dt, shape, pack(vals, dt)))
    return out


# ---------------------------------------------------------------------------------------------------
# JSON files


def hf_config(cfg):
    enc = {
        "model_type": "parakeet_encoder",
        "hidden_size": cfg["d"],
        "num_hidden_layers": cfg["layers"],
        "num_attention_heads": cfg["heads"],
        "intermediate_size": cfg["ff"],
        "hidden_act": "silu",
        "attention_bias": cfg["attention_bias"],
        "conv_kernel_size": cfg["kernel"],
        "subsampling_factor": 8,
        "subsampling_conv_channels": cfg["channels"],
        "subsampling_conv_kernel_size": 3,
        "subsampling_conv_stride": 2,
        "num_mel_bins": cfg["mels"],
        "dropout": 0.0,
        "dropout_positions": 0.0,
        "layerdrop": 0.0,
        "activation_dropout": 0.0,
        "attention_dropout": 0.0,
        "max_position_embeddings": 5000,
        "initializer_range": 0.02,
    }
    # keys left out on purpose fall back to transformers' defaults (true for both)
    if "write_conv_bias" not in cfg or cfg["write_conv_bias"]:
        enc["convolution_bias"] = cfg["conv_bias"]
    if cfg.get("write_scale_input", True):
        enc["scale_input"] = cfg["xscaling"]
    V1 = cfg["vocab"] + 1
    if cfg["head"] == "ctc":
        return {
            "architectures": ["ParakeetForCTC"],
            "model_type": "parakeet_ctc",
            "vocab_size": V1,
            "pad_token_id": V1 - 1,
            "ctc_loss_reduction": "mean",
            "ctc_zero_infinity": True,
            "encoder_config": enc,
            "dtype": "float32",
        }
    c = {
        "architectures": ["ParakeetForTDT" if cfg["head"] == "tdt" else "ParakeetForRNNT"],
        "model_type": "parakeet_tdt" if cfg["head"] == "tdt" else "parakeet_rnnt",
        "vocab_size": V1,
        "blank_token_id": V1 - 1,
        "pad_token_id": cfg["pad_id"],
        "decoder_hidden_size": cfg["pred"],
        "num_decoder_layers": cfg["pred_layers"],
        "hidden_act": "relu",
        "max_symbols_per_step": 10,
        "is_encoder_decoder": True,
        "encoder_config": enc,
        "dtype": "float32",
    }
    if cfg["head"] == "tdt":
        c["durations"] = cfg["durations"]
    return c


def feature_extractor(cfg):
    return {
        "feature_extractor_type": "ParakeetFeatureExtractor",
        "feature_size": cfg["mels"],
        "sampling_rate": 16000,
        "hop_length": 160,
        "n_fft": 512,
        "win_length": 400,
        "preemphasis": 0.97,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": True,
    }


BYTE_PIECES = ["<0xC3>", "<0xA9>", "<0xE2>", "<0x82>", "<0xAC>"]  # e-acute and the euro sign in UTF-8
NORMAL_PIECES = [SPACE, "t", "h", "e", "a", "c", ".", ",", SPACE + "t", SPACE + "c", "at", SPACE + "cat"]
MERGES = [[SPACE, "t"], [SPACE, "c"], ["a", "t"], [SPACE + "c", "at"]]


def pieces_for(head):
    """The SentencePiece pieces (id order) and SentencePiece types (1 normal, 2 unknown, 3 control,
    4 user defined, 6 byte)."""
    third = "<pad>" if head == "tdt" else "</s>"
    pieces = ["<unk>", "<s>", third] + BYTE_PIECES + NORMAL_PIECES
    types = [2, 3, 3] + [6] * len(BYTE_PIECES) + [1] * len(NORMAL_PIECES)
    if head == "rnnt":
        types[pieces.index(",")] = 4
    return pieces, types


def added(id_, content, special):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def tokenizer_json(head):
    """What ParakeetConverter + the conversion script write: BPE model with byte_fallback, CONTROL and
    USER_DEFINED pieces as added tokens, <unk> re-added as a special token, and <pad>/<blank> at id V."""
    pieces, types = pieces_for(head)
    V = len(pieces)
    toks = []
    for i, (p, ty) in enumerate(zip(pieces, types)):
        if ty in (2, 3, 4):
            toks.append(added(i, p, ty != 4))
    toks.append(added(V, "<pad>" if head == "ctc" else "<blank>", True))
    meta = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": toks,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": SPACE}]},
        "pre_tokenizer": meta,
        "post_processor": None,
        "decoder": meta,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": {p: i for i, p in enumerate(pieces)},
            "merges": MERGES,
        },
    }


def tokenizer_config(head, V):
    pad = "<pad>" if head != "rnnt" else "<blank>"
    return {"tokenizer_class": "ParakeetTokenizer", "clean_up_tokenization_spaces": False,
            "unk_token": "<unk>", "pad_token": pad, "model_input_names": ["input_ids", "attention_mask"]}


def dump_json(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


# ---------------------------------------------------------------------------------------------------


TINY = {"d": 16, "layers": 2, "heads": 2, "ff": 32, "kernel": 9, "channels": 8, "mels": 16, "vocab": 20}

CONFIGS = {
    "tdt": dict(TINY, head="tdt", attention_bias=False, conv_bias=False, xscaling=False, pred=8, pred_layers=2,
                durations=[0, 1, 2, 3, 4], pad_id=2, num_batches_tracked=True, seed=1),
    "rnnt": dict(TINY, head="rnnt", attention_bias=True, conv_bias=True, xscaling=True, pred=8, pred_layers=1,
                 pad_id=20, seed=2, processor_config=True),
    "ctc": dict(TINY, head="ctc", attention_bias=True, conv_bias=True, xscaling=True, write_conv_bias=False,
                write_scale_input=False, seed=3),
}


def write_dir(out, cfg, tensors=None, shards=None):
    """Writes one HF directory. shards: list of (file name, dtype, predicate(name)) for a sharded
    checkpoint; otherwise one F32 model.safetensors."""
    os.makedirs(out, exist_ok=True)
    if tensors is None:
        tensors = make_tensors(cfg, cfg["seed"])
    dump_json(os.path.join(out, "config.json"), hf_config(cfg))
    fe = feature_extractor(cfg)
    if cfg.get("processor_config"):
        dump_json(os.path.join(out, "processor_config.json"),
                  {"processor_class": "ParakeetProcessor", "feature_extractor": fe})
    else:
        dump_json(os.path.join(out, "preprocessor_config.json"), dict(fe, processor_class="ParakeetProcessor"))
    dump_json(os.path.join(out, "tokenizer.json"), tokenizer_json(cfg["head"]))
    dump_json(os.path.join(out, "tokenizer_config.json"), tokenizer_config(cfg["head"], cfg["vocab"]))
    if not shards:
        with open(os.path.join(out, "model.safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensor_entries(tensors), {"format": "pt"}))
        return tensors
    weight_map, total = {}, 0
    for fname, dtype, pred in shards:
        part = {n: v for n, v in tensors.items() if pred(n)}
        entries = tensor_entries(part, lambda name, dt=dtype: dt)
        with open(os.path.join(out, fname), "wb") as f:
            f.write(safetensors_bytes(entries, {"format": "pt"}))
        for n, _, _, raw in entries:
            weight_map[n] = fname
            total += len(raw)
    dump_json(os.path.join(out, "model.safetensors.index.json"),
              {"metadata": {"total_size": total}, "weight_map": weight_map})
    return tensors


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "tiny")
    for name, cfg in CONFIGS.items():
        write_dir(os.path.join(root, name), cfg)
    # the ctc weights, first shard f16 (subsampling + layer 0), second bf16 (the rest)
    cfg = CONFIGS["ctc"]
    write_dir(os.path.join(root, "ctc_sharded"), cfg, make_tensors(cfg, cfg["seed"]), shards=[
        ("model-00001-of-00002.safetensors", "F16",
         lambda n: n.startswith("encoder.subsampling.") or n.startswith("encoder.layers.0.")),
        ("model-00002-of-00002.safetensors", "BF16",
         lambda n: not (n.startswith("encoder.subsampling.") or n.startswith("encoder.layers.0."))),
    ])
    for d in sorted(os.listdir(root)):
        p = os.path.join(root, d)
        if os.path.isdir(p):
            size = sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p))
            print("%s: %d bytes" % (p, size))


if __name__ == "__main__":
    main()
