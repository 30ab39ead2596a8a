#!/usr/bin/env python3
"""make_shaped_model.py - writes a Hugging Face Parakeet TDT directory of a given size with random
weights (numpy), for timing: the tensors, names and layout of tools/make_tiny_model.py (whose JSON files
it reuses), in f16 safetensors. Default: the 0.6B shape (d_model 1024, 24 layers, 8 heads, ff 4096,
256 subsampling channels, 128 mels, prediction/joint 640, 2 LSTM layers, durations 0..4), with the tiny
models' 20-piece vocabulary (the joint has 26 outputs instead of 0.6B's 1030: its decoder does less).

Usage: python3 tools/make_shaped_model.py OUTDIR [--layers N] [--d N] [--ff N] [--heads N] [--seed S]
Then: vkasr transcribe -m OUTDIR ... (or vkasr convert OUTDIR -o model.gguf --type f16)
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_model as tiny  # noqa: E402


def tensors(cfg, rng):
    """name -> float32 array, in make_tiny_model.make_tensors' order and layout (TDT, no biases)."""
    t = {}
    D, L, H, FF, K = cfg["d"], cfg["layers"], cfg["heads"], cfg["ff"], cfg["kernel"]
    C, M, V1, P = cfg["channels"], cfg["mels"], cfg["vocab"] + 1, cfg["pred"]

    def rand(name, shape, std):
        t[name] = (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def uni(name, shape, lo, hi):
        t[name] = rng.uniform(lo, hi, size=shape).astype(np.float32)

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
        for n in ("feed_forward1", "norm_feed_forward1", "self_attn", "norm_self_att", "conv", "norm_conv",
                  "feed_forward2", "norm_feed_forward2", "norm_out"):
            if n.startswith("feed_forward"):
                rand(p + n + ".linear1.weight", [FF, D], w)
                rand(p + n + ".linear2.weight", [D, FF], 1.0 / math.sqrt(FF))
            elif n.startswith("norm"):
                uni(p + n + ".weight", [D], 0.8, 1.2)
                rand(p + n + ".bias", [D], 0.05)
            elif n == "self_attn":
                for q in "qkvo":
                    rand(p + "self_attn.%s_proj.weight" % q, [D, D], w)
                rand(p + "self_attn.relative_k_proj.weight", [D, D], w)
                rand(p + "self_attn.bias_u", [H, D // H], 0.1)
                rand(p + "self_attn.bias_v", [H, D // H], 0.1)
            else:
                rand(p + "conv.pointwise_conv1.weight", [2 * D, D, 1], w)
                rand(p + "conv.depthwise_conv.weight", [D, 1, K], 1.0 / math.sqrt(K))
                uni(p + "conv.norm.weight", [D], 0.8, 1.2)
                rand(p + "conv.norm.bias", [D], 0.1)
                rand(p + "conv.norm.running_mean", [D], 0.1)
                uni(p + "conv.norm.running_var", [D], 0.5, 1.5)
                rand(p + "conv.pointwise_conv2.weight", [D, D, 1], w)
    NJ = V1 + len(cfg["durations"])
    rand("encoder_projector.weight", [P, D], w)
    rand("encoder_projector.bias", [P], 0.05)
    rand("decoder.embedding.weight", [V1, P], 0.5)
    t["decoder.embedding.weight"][V1 - 1, :] = 0.0  # padding_idx = blank
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


def write_safetensors(path, t):
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, a in t.items():
        n = a.size * 2
        header[name] = {"dtype": "F16", "shape": list(a.shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for a in t.values():
            f.write(a.astype("<f2").tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--ff", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seed", type=int, default=6)
    a = ap.parse_args()
    cfg = dict(tiny.CONFIGS["tdt"], d=a.d, layers=a.layers, heads=a.heads, ff=a.ff, kernel=9, channels=256, mels=128,
               pred=640, pred_layers=2, num_batches_tracked=False)
    os.makedirs(a.out, exist_ok=True)
    t = tensors(cfg, np.random.default_rng(a.seed))
    tiny.dump_json(os.path.join(a.out, "config.json"), tiny.hf_config(cfg))
    tiny.dump_json(os.path.join(a.out, "preprocessor_config.json"),
                   dict(tiny.feature_extractor(cfg), processor_class="ParakeetProcessor"))
    tiny.dump_json(os.path.join(a.out, "tokenizer.json"), tiny.tokenizer_json("tdt"))
    tiny.dump_json(os.path.join(a.out, "tokenizer_config.json"), tiny.tokenizer_config("tdt", cfg["vocab"]))
    write_safetensors(os.path.join(a.out, "model.safetensors"), t)
    print("%s: %.1fM parameters" % (a.out, sum(x.size for x in t.values()) / 1e6))


if __name__ == "__main__":
    main()
