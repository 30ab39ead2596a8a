#!/usr/bin/env python3
"""make_shaped_model.py - writes a Hugging Face Parakeet TDT directory of a given size with random
weights (numpy), for timing: the tensors, names and layout of tools/make_tiny_model.py (whose JSON files
it reuses), in f16 safetensors. Default: the 0.6B shape (d_model 1024, 24 layers, 8 heads, ff 4096,
256 subsampling channels, 128 mels, prediction/joint 640, 2 LSTM layers, durations 0..4), with the tiny
models' 20-piece vocabulary (the joint has 26 outputs instead of 0.6B's 1030: its decoder does less).

--streaming writes the cache-aware streaming shape instead (nemotron-speech-streaming-en-0.6b: causal
subsampling of 128 mels into 17 bins, the LayerNorm conv module, RNN-T with 2 x 640 LSTM layers) in
transformers' NemotronAsrStreaming layout, with the lookahead menu [[70, 1], [70, 13], [70, 6], [70, 0]]
and the streaming fixture's 128-piece vocabulary and tokenizer (tests/data/streaming/stream_rnnt_hf).

Usage: python3 tools/make_shaped_model.py OUTDIR [--layers N] [--d N] [--ff N] [--heads N] [--seed S]
       [--streaming]
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


class NumpyFill:
    """make_tiny_model.make_tensors' values as float32 numpy arrays (its ListFill draws element by element
    in Python, far too slow at this size)."""

    def __init__(self, rng):
        self.rng = rng

    def normal(self, shape, std, mean=0.0):
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean)

    def uniform(self, shape, lo, hi):
        return self.rng.uniform(lo, hi, size=shape).astype(np.float32)

    def scalar(self, v):
        return np.array(v, dtype=np.float32)

    def zero_last_row(self, value):
        value[-1, :] = 0.0


def tensors(cfg, rng):
    """name -> float32 array: make_tiny_model.make_tensors' layout (TDT, no biases) at cfg's size."""
    return tiny.make_tensors(cfg, None, fill=NumpyFill(rng))


STREAM_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "streaming",
                              "stream_rnnt_hf")


def streaming_tensors(a, rng, C=256, M=128, P=640, V1=129, K=9):
    """name -> float32 array of transformers' NemotronAsrStreamingForRNNT at the given size."""
    t = {}
    D, FF, H = a.d, a.ff, a.heads

    def rand(name, shape, std):
        t[name] = rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    F3 = M
    for _ in range(3):
        F3 = F3 // 2 + 1  # causal: floor(n/2)+1 per stage (128 -> 65 -> 33 -> 17)
    rand("encoder.subsampling.conv_in.weight", [C, 1, 3, 3], 0.3)
    rand("encoder.subsampling.conv_in.bias", [C], 0.1)
    for i in range(2):
        q = "encoder.subsampling.layers.%d." % i
        rand(q + "depthwise_conv.weight", [C, 1, 3, 3], 0.3)
        rand(q + "depthwise_conv.bias", [C], 0.1)
        rand(q + "pointwise_conv.weight", [C, C, 1, 1], 1.0 / math.sqrt(C))
        rand(q + "pointwise_conv.bias", [C], 0.1)
    rand("encoder.subsampling.linear.weight", [D, C * F3], 1.0 / math.sqrt(C * F3))
    rand("encoder.subsampling.linear.bias", [D], 0.1)
    w = 1.0 / math.sqrt(D)
    for l in range(a.layers):
        q = "encoder.layers.%d." % l
        for ff in ("feed_forward1", "feed_forward2"):
            rand(q + ff + ".linear1.weight", [FF, D], w)
            rand(q + ff + ".linear1.bias", [FF], 0.02)
            rand(q + ff + ".linear2.weight", [D, FF], 1.0 / math.sqrt(FF))
            rand(q + ff + ".linear2.bias", [D], 0.02)
        for n in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out", "conv.norm"):
            t[q + n + ".weight"] = (1.0 + 0.1 * rng.standard_normal([D])).astype(np.float32)
            rand(q + n + ".bias", [D], 0.05)
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            rand(q + "self_attn.%s.weight" % n, [D, D], w)
            rand(q + "self_attn.%s.bias" % n, [D], 0.02)
        rand(q + "self_attn.relative_k_proj.weight", [D, D], w)
        rand(q + "self_attn.bias_u", [H, D // H], 0.1)
        rand(q + "self_attn.bias_v", [H, D // H], 0.1)
        rand(q + "conv.pointwise_conv1.weight", [2 * D, D, 1], w)
        rand(q + "conv.pointwise_conv1.bias", [2 * D], 0.02)
        rand(q + "conv.depthwise_conv.weight", [D, 1, K], 1.0 / math.sqrt(K))
        rand(q + "conv.depthwise_conv.bias", [D], 0.02)
        rand(q + "conv.pointwise_conv2.weight", [D, D, 1], w)
        rand(q + "conv.pointwise_conv2.bias", [D], 0.02)
    rand("encoder_projector.weight", [P, D], w)
    rand("encoder_projector.bias", [P], 0.02)
    rand("decoder.embedding.weight", [V1, P], 0.3)
    for l in range(2):
        rand("decoder.lstm.weight_ih_l%d" % l, [4 * P, P], 1.0 / math.sqrt(P))
        rand("decoder.lstm.weight_hh_l%d" % l, [4 * P, P], 1.0 / math.sqrt(P))
        rand("decoder.lstm.bias_ih_l%d" % l, [4 * P], 0.02)
        rand("decoder.lstm.bias_hh_l%d" % l, [4 * P], 0.02)
    rand("decoder.decoder_projector.weight", [P, P], 1.0 / math.sqrt(P))
    rand("decoder.decoder_projector.bias", [P], 0.02)
    rand("joint.head.weight", [V1, P], 1.0 / math.sqrt(P))
    rand("joint.head.bias", [V1], 0.02)
    t["joint.head.bias"][V1 - 1] += 3.0  # mostly blanks, as a trained model emits: the decoder's work is realistic
    return t


def write_streaming(a):
    """The streaming shape in transformers' layout: the fixture's config, processor and tokenizer, resized."""
    def load(name):
        with open(os.path.join(STREAM_FIXTURE, name)) as f:
            return json.load(f)
    cfg = load("config.json")
    cfg.update(decoder_hidden_size=640, num_decoder_layers=2)
    cfg["encoder_config"].update(hidden_size=a.d, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                                 intermediate_size=a.ff, subsampling_conv_channels=256, num_mel_bins=128,
                                 sliding_window=71, supported_num_lookahead_tokens=[1, 13, 6, 0],
                                 default_num_lookahead_tokens=1)
    proc = load("processor_config.json")
    proc["feature_extractor"]["feature_size"] = 128
    os.makedirs(a.out, exist_ok=True)
    tiny.dump_json(os.path.join(a.out, "config.json"), cfg)
    tiny.dump_json(os.path.join(a.out, "processor_config.json"), proc)
    tiny.dump_json(os.path.join(a.out, "tokenizer.json"), load("tokenizer.json"))
    t = streaming_tensors(a, np.random.default_rng(a.seed))
    write_safetensors(os.path.join(a.out, "model.safetensors"), t)
    print("%s: %.1fM parameters (streaming)" % (a.out, sum(x.size for x in t.values()) / 1e6))


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
    ap.add_argument("--streaming", action="store_true")
    a = ap.parse_args()
    if a.streaming:
        write_streaming(a)
        return
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
