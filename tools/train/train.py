#!/usr/bin/env python3
"""Trains vkasr's small default English model: a FastConformer-TDT (transformers' ParakeetForTDT) on
synthetic espeak-ng speech.  One command per chunk on the GPU machine (tools/train/README.md):

    . tools/train/espeak_env.sh
    PYTHONUNBUFFERED=1 python3 tools/train/train.py --minutes 9 --out "$OUT"               # chunk 1
    PYTHONUNBUFFERED=1 python3 tools/train/train.py --minutes 9 --resume .ckpt --final --out "$OUT"  # chunk 2
    PYTHONUNBUFFERED=1 python3 tools/train/train.py --smoke --out "$OUT"                   # < 1 min check

What one run does:
 1. corpus (tools/train/corpus.py): ~30 h of training speech and the held-out set, synthesised in
    parallel with libespeak-ng into /tmp (reused when the same corpus is already there);
 2. self-tests: the TDT loss against path enumeration / gradcheck / transformers' loss_tdt, the
    batched greedy decoder against a line-by-line spec 6.4 decoder, this script's GPU log-mel against
    transformers' ParakeetFeatureExtractor, the HF tokenizer against SentencePiece, our joint against
    ParakeetForTDT.forward;
 3. a SentencePiece BPE vocabulary trained on the corpus text (taken from the checkpoint on resume),
    turned into tokenizer.json by transformers' ParakeetConverter exactly as convert_nemo_to_hf.py does;
 4. training: all audio on the GPU as int16, batches of similar length, random gain, coloured noise
    and start offset on the GPU, log-mel on the GPU, light SpecAugment, bf16 autocast, AdamW with
    warm-up and a cosine schedule over the total planned training time of all chunks, TDT loss
    (tdt.py); greedy-decoding WER on held-out clips every few minutes;
 5. before --minutes is up: a checkpoint (model fp32 + AdamW second moments bf16 + vocabulary, split
    into <= 15 MiB parts ckpt.pt.NN) unless --final; with --final (or --export): the evaluation on
    the whole held-out set per voice, the Hugging Face directory (save_pretrained + processor), its
    reload check, a comparison with transformers' generate(), and tar.gz archives split into parts.
Everything printed also goes to OUT/train-log.txt.

--streaming trains the cache-aware streaming RNN-T of streaming.py instead (tools/train/README.md, "The
streaming model"): no transformers, no feature normalisation, one attention context of --menu per batch,
RNN-T loss, held-out WER per lookahead, export in transformers' NemotronAsrStreaming layout; --init
starts it from a vkasr GGUF.
"""

import argparse
import glob
import hashlib
import io
import json
import math
import os
import platform
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tools", "fixtures")
STUBS = os.path.join(FIXTURES, "stubs")
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import corpus  # noqa: E402  (numpy only: safe to import before the spawn pool runs)

DURATIONS = [0, 1, 2, 3, 4]
PART_BYTES = int(os.environ.get("VKASR_TRAIN_PART_BYTES", 15 * 1024 * 1024))  # returned files must be <= 16 MiB
MODEL_NAME = "vkasr-tdt-tiny-en"
STREAM_NAME = "vkasr-rnnt-stream-tiny-en"


# ----------------------------------------------------------------------------------------------
# logging and time


class Log:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8") if path else None
        self.t0 = time.time()

    def __call__(self, msg=""):
        line = f"[{time.time() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()


def fail(log, msg):
    log("ERROR: " + msg)
    raise SystemExit(1)


def guarded(log, what, fn):
    """Runs fn(); on an exception logs the traceback and returns None (used after training, so that a
    failing check or evaluation never costs the trained weights)."""
    import traceback

    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - reported, not swallowed silently
        log(f"ERROR in {what}: {type(e).__name__}: {e}")
        for line in traceback.format_exc().rstrip().splitlines():
            log("    " + line)
        return None


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_argument_group("run")
    g.add_argument("--out", default=os.environ.get("OUT") or "/tmp/vkasr_train/out",
                   help="where checkpoints, archives and the log go (default $OUT)")
    g.add_argument("--work", default="/tmp/vkasr_train", help="corpus cache and scratch space")
    g.add_argument("--minutes", type=float, default=9.0,
                   help="wall-clock budget of this run from process start; training stops early enough to "
                        "save and export within it")
    g.add_argument("--total-train-minutes", type=float, default=13.5,
                   help="planned training time of all chunks together (sets the learning-rate schedule of a "
                        "non-final chunk)")
    g.add_argument("--final", action="store_true", help="last chunk: decay the learning rate to its end, then "
                                                         "evaluate everything and export (no checkpoint)")
    g.add_argument("--export", action="store_true", help="also evaluate and export at the end of a non-final chunk")
    g.add_argument("--keep-ckpt", action="store_true", help="write a checkpoint even with --final")
    g.add_argument("--resume", default=None, help="checkpoint: a directory holding ckpt.pt.NN parts, or a part")
    g.add_argument("--export-only", action="store_true", help="with --resume: no training, evaluate and export")
    g.add_argument("--smoke", action="store_true", help="tiny corpus, 20 steps, every self-test and the export "
                                                        "path; about a minute")
    g.add_argument("--seed", type=int, default=1234)
    g.add_argument("--workers", type=int, default=None, help="corpus processes (default: CPUs - 1)")
    g.add_argument("--device", default=None)
    g.add_argument("--dev-mock", action="store_true", help=argparse.SUPPRESS)  # CPU test without transformers
    g = ap.add_argument_group("data")
    g.add_argument("--hours", type=float, default=30.0, help="training audio to synthesise")
    g.add_argument("--heldout-per-voice", type=int, default=50)
    g.add_argument("--vocab", type=int, default=512, help="SentencePiece BPE pieces (V; blank is id V)")
    g = ap.add_argument_group("model")
    g.add_argument("--d-model", type=int, default=176)
    g.add_argument("--layers", type=int, default=8)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--ff", type=int, default=704)
    g.add_argument("--conv-kernel", type=int, default=9)
    g.add_argument("--sub-channels", type=int, default=176)
    g.add_argument("--mels", type=int, default=128)
    g.add_argument("--pred-hidden", type=int, default=256)
    g.add_argument("--pred-layers", type=int, default=1)
    g.add_argument("--dropout", type=float, default=0.05)
    g = ap.add_argument_group("streaming (tools/train/streaming.py)")
    g.add_argument("--streaming", action="store_true",
                   help="a cache-aware streaming RNN-T: causal subsampling and convolutions, LayerNorm conv module, "
                        "chunked_limited attention with one pair of --menu per batch, no feature normalisation")
    g.add_argument("--menu", default="64,7;64,1;64,0", help="attention contexts L,R;L,R;... (the first is the default)")
    g.add_argument("--init", default=None, help="vkasr GGUF (f32/f16) of the same depth to start from, its vocabulary "
                   "too: the offline model (models/vkasr-tdt-tiny-en.gguf) or a streaming one, narrowed to the "
                   "sizes given when it is wider")
    g = ap.add_argument_group("optimisation")
    g.add_argument("--batch-seconds", type=float, default=800.0, help="padded audio seconds per batch")
    g.add_argument("--lr", type=float, default=2.5e-3)
    g.add_argument("--warmup-steps", type=int, default=400)
    g.add_argument("--final-lr-frac", type=float, default=0.02)
    g.add_argument("--weight-decay", type=float, default=1e-3)
    g.add_argument("--clip", type=float, default=1.0)
    g.add_argument("--sigma", type=float, default=0.02, help="TDT logit undernormalisation")
    g.add_argument("--noise-prob", type=float, default=0.8)
    g.add_argument("--no-specaug", action="store_true")
    g.add_argument("--max-steps", type=int, default=None)
    g.add_argument("--eval-every", type=float, default=150.0, help="seconds between held-out WER checks")
    g.add_argument("--eval-subset", type=int, default=264)
    g.add_argument("--log-every", type=float, default=20.0)
    g.add_argument("--reserve", type=float, default=None, help="seconds kept after training for the evaluation, "
                   "checkpoint and export (default 100 with --final, else 45)")
    a = ap.parse_args(argv)
    if a.export_only and not a.resume:
        ap.error("--export-only needs --resume")
    if a.export_only:
        a.final = True
    if a.init and not a.streaming:
        ap.error("--init needs --streaming")
    if a.smoke:
        a.hours = 0.06
        a.heldout_per_voice = 3
        a.vocab = min(a.vocab, 128)
        a.batch_seconds = 60.0
        a.max_steps = 20
        a.warmup_steps = 5
        a.eval_subset = 16
        a.eval_every = 1e9
        a.minutes = min(a.minutes, 4.0)
        a.log_every = 2.0
    return a


# ----------------------------------------------------------------------------------------------
# imports that need the stand-ins (transformers imports librosa/soxr when it finds them)


def import_hf():
    import importlib.util

    if importlib.util.find_spec("librosa") is None or importlib.util.find_spec("soxr") is None:
        if not os.path.isdir(STUBS):
            raise RuntimeError(f"librosa/soxr are missing and the stand-ins are not at {STUBS}")
        sys.path.append(STUBS)
    import transformers

    return transformers


# ----------------------------------------------------------------------------------------------
# vocabulary


def train_spm(texts, vocab, smoke, log):
    import sentencepiece as spm

    bio = io.BytesIO()
    kw = dict(sentence_iterator=iter(texts), model_writer=bio, vocab_size=vocab, model_type="bpe",
              character_coverage=1.0, unk_id=0, pad_id=1, bos_id=-1, eos_id=-1, unk_piece="<unk>",
              pad_piece="<pad>", normalization_rule_name="identity", num_threads=min(16, os.cpu_count() or 1),
              input_sentence_size=0, shuffle_input_sentence=False, byte_fallback=False,
              hard_vocab_limit=not smoke, minloglevel=2)
    spm.SentencePieceTrainer.train(**kw)
    data = bio.getvalue()
    log(f"sentencepiece: BPE trained on {len(texts)} sentences, {len(data)} bytes")
    return data


def load_spm(data):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(data)
    return sp


def build_hf_tokenizer(tf, spm_path, V, sp, texts, log):
    """As convert_nemo_to_hf.write_processor (model_type 'tdt'): ParakeetConverter -> ParakeetTokenizer,
    <unk> (id 0) and <pad> (id 1) are SentencePiece pieces, <blank> is added at id V; checked against
    SentencePiece piece by piece and on decoding."""
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import ParakeetConverter

    try:
        backend = ParakeetConverter(spm_path).converted()
        how = "ParakeetConverter"
    except ImportError as e:  # no protobuf: same converter, fxlib's protobuf-free parser
        sys.path.insert(0, FIXTURES)
        import fxlib

        log(f"  ParakeetConverter needs protobuf ({str(e).splitlines()[0][:60]}); using fxlib's parser")

        class _Converter(ParakeetConverter):
            def __init__(self, vocab_file):
                self.vocab_file = vocab_file
                self.original_tokenizer = vocab_file
                with open(vocab_file, "rb") as fh:
                    self.proto = fxlib.parse_spm_model(fh.read())

        backend = _Converter(spm_path).converted()
        how = "ParakeetConverter + fxlib parser"
    tok = tf.ParakeetTokenizer(tokenizer_object=backend, clean_up_tokenization_spaces=False)
    vocab = tok.get_vocab()
    if "<unk>" not in vocab:
        tok.add_tokens([AddedToken("<unk>", normalized=False, special=True)])
    if "<pad>" not in vocab:
        tok.add_tokens([AddedToken("<pad>", normalized=False, special=True)])
    tok.add_tokens([AddedToken("<blank>", normalized=False, special=True)])
    tok.add_special_tokens({"pad_token": AddedToken("<pad>", normalized=False, special=True),
                            "unk_token": AddedToken("<unk>", normalized=False, special=True)})
    if len(tok) != V + 1 or tok.convert_tokens_to_ids("<blank>") != V:
        raise RuntimeError(f"tokenizer: {len(tok)} entries, <blank> id {tok.convert_tokens_to_ids('<blank>')}; "
                           f"expected V+1 = {V + 1} and {V}")
    if tok.convert_tokens_to_ids("<unk>") != 0 or tok.convert_tokens_to_ids("<pad>") != 1:
        raise RuntimeError("tokenizer: <unk>/<pad> are not ids 0/1")
    pieces = tok.convert_ids_to_tokens(list(range(V)))
    bad = [i for i in range(V) if pieces[i] != sp.id_to_piece(i)]
    if bad:
        raise RuntimeError(f"tokenizer: ids {bad[:5]} differ from SentencePiece "
                           f"({[pieces[i] for i in bad[:5]]} vs {[sp.id_to_piece(i) for i in bad[:5]]})")
    bad_dec, bad_enc = 0, 0
    for t in texts[:300]:
        ids = sp.encode(t)
        if sp.decode(ids) != t:
            raise RuntimeError(f"SentencePiece does not round-trip {t!r}: {sp.decode(ids)!r}")
        bad_dec += corpus.normalize_text(hf_decode(tok, ids)) != t
        bad_enc += tok.encode(t, add_special_tokens=False) != ids
    # vkasr decodes from the piece table (checked above); transformers' own decode/encode are reported
    log(f"tokenizer: {how}; {V} pieces + <blank> = id {V}; piece table == SentencePiece; transformers' decode "
        f"differs on {bad_dec}/300, encode on {bad_enc}/300 sentences")
    return tok


def hf_decode(tok, ids):
    """ParakeetTokenizer.decode without its CTC-style grouping of repeated ids (spec 7.4)."""
    try:
        return tok.decode(ids, skip_special_tokens=True, group_tokens=False)
    except TypeError:
        return tok.decode(ids, skip_special_tokens=True)


# ----------------------------------------------------------------------------------------------
# model


def model_config_from_args(a, V):
    return {"d_model": a.d_model, "layers": a.layers, "heads": a.heads, "ff": a.ff, "conv_kernel": a.conv_kernel,
            "sub_channels": a.sub_channels, "mels": a.mels, "pred_hidden": a.pred_hidden,
            "pred_layers": a.pred_layers, "dropout": a.dropout, "vocab": V, "durations": DURATIONS}


def build_model(tf, mc, log):
    V = mc["vocab"]
    enc_kw = dict(hidden_size=mc["d_model"], num_hidden_layers=mc["layers"], num_attention_heads=mc["heads"],
                  intermediate_size=mc["ff"], hidden_act="silu", attention_bias=False, convolution_bias=False,
                  conv_kernel_size=mc["conv_kernel"], subsampling_factor=8,
                  subsampling_conv_channels=mc["sub_channels"], num_mel_bins=mc["mels"],
                  subsampling_conv_kernel_size=3, subsampling_conv_stride=2, dropout=mc["dropout"],
                  dropout_positions=0.0, layerdrop=0.0, activation_dropout=mc["dropout"],
                  attention_dropout=mc["dropout"], max_position_embeddings=5000, scale_input=False,
                  initializer_range=0.02)
    enc = tf.ParakeetEncoderConfig(**enc_kw)
    for k, v in enc_kw.items():
        if getattr(enc, k, None) != v:
            raise RuntimeError(f"ParakeetEncoderConfig ignored {k}={v!r} (has {getattr(enc, k, None)!r})")
    cfg = tf.ParakeetTDTConfig(vocab_size=V + 1, decoder_hidden_size=mc["pred_hidden"],
                               num_decoder_layers=mc["pred_layers"], durations=list(mc["durations"]),
                               hidden_act="relu", max_symbols_per_step=10, encoder_config=enc.to_dict(),
                               pad_token_id=1, blank_token_id=V)
    for k, v in dict(vocab_size=V + 1, decoder_hidden_size=mc["pred_hidden"], num_decoder_layers=mc["pred_layers"],
                     blank_token_id=V, pad_token_id=1).items():
        if getattr(cfg, k, None) != v:
            raise RuntimeError(f"ParakeetTDTConfig ignored {k}={v!r} (has {getattr(cfg, k, None)!r})")
    if list(cfg.durations) != list(mc["durations"]):
        raise RuntimeError(f"ParakeetTDTConfig durations {cfg.durations}")
    model = tf.ParakeetForTDT(cfg)
    init_weights_(model, V)
    log(f"model: ParakeetForTDT, attention implementation {getattr(model.config, '_attn_implementation', '?')}")
    return model


def init_weights_(model, blank):
    """PyTorch's default initialisation for every layer (transformers' std 0.02 normal makes the first
    conv stack's output tiny), LSTM forget-gate bias 1 (as NeMo), blank embedding row zero (NeMo's
    padding_idx; spec 6.2: the SOS input is a zero vector)."""
    import torch
    from torch import nn

    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.LSTM, nn.Embedding, nn.LayerNorm, nn.BatchNorm1d)):
            m.reset_parameters()
    with torch.no_grad():
        lstm = model.decoder.lstm
        P = lstm.hidden_size
        for l in range(lstm.num_layers):
            getattr(lstm, f"bias_ih_l{l}")[P:2 * P].fill_(1.0)
            getattr(lstm, f"bias_hh_l{l}")[P:2 * P].zero_()
        model.decoder.embedding.weight[blank].zero_()


def joint_activation(model):
    act = getattr(model.joint, "activation", None)
    if act is None:
        import torch

        act = torch.relu
    return act


def size_report(model, log):
    """Parameter count and the size `vkasr convert --type f16` will write: encoder matrix weights
    (attention / feed-forward / conv-module pointwise projections, subsampling pointwise convs and
    linear) in f16, everything else f32 (src/model/model_types.h model_is_matrix_weight); BatchNorm is
    folded into the depthwise conv (its 4 vectors become 1 bias)."""
    n_total, f16, f32 = 0, 0, 0
    for name, p in model.state_dict().items():
        if not p.is_floating_point():
            continue
        n = p.numel()
        n_total += n
        if ".conv.norm." in name:
            if name.endswith("running_var"):
                f32 += n  # the folded bias
            continue
        matrix = (name.startswith("encoder.layers.") and p.dim() >= 2 and "depthwise" not in name
                  and "bias_" not in name) or \
                 (name.startswith("encoder.subsampling.") and name.endswith("weight") and
                  (".3." in name or ".6." in name or "linear" in name))
        if matrix:
            f16 += n
        else:
            f32 += n
    est = 2 * f16 + 4 * f32
    log(f"model: {n_total / 1e6:.2f} M parameters; GGUF f16 estimate {est / 1e6:.1f} MB "
        f"({f16 / 1e6:.2f} M f16 + {f32 / 1e6:.2f} M f32)")
    return n_total, est


class MockTDT:
    """--dev-mock: a small pure-PyTorch stand-in with ParakeetForTDT's attribute layout, so the data,
    loss, optimiser, evaluation and checkpoint code can be exercised on a machine without
    transformers.  Not a conformer."""

    @staticmethod
    def build(mc):
        import torch
        from torch import nn

        V, D, P = mc["vocab"], mc["d_model"], mc["pred_hidden"]

        class Cfg:
            pass

        class Out:
            pass

        class Enc(nn.Module):  # 3 stride-2 convs (x8 like the real model) + a 2-layer BiLSTM
            def __init__(self):
                super().__init__()
                self.sub = nn.Sequential(nn.Conv1d(mc["mels"], D, 3, stride=2, padding=1), nn.ReLU(),
                                         nn.Conv1d(D, D, 3, stride=2, padding=1), nn.ReLU(),
                                         nn.Conv1d(D, D, 3, stride=2, padding=1), nn.ReLU())
                self.rnn = nn.LSTM(D, D // 2, num_layers=2, bidirectional=True, batch_first=True)

            def forward(self, input_features, attention_mask):
                h = self.sub(input_features.transpose(1, 2)).transpose(1, 2)
                o = Out()
                o.last_hidden_state = self.rnn(h)[0]
                T = attention_mask.sum(-1)
                for _ in range(3):
                    T = -(-T // 2)
                o.attention_mask = (torch.arange(h.shape[1], device=h.device)[None] < T[:, None]).int()
                return o

        class Dec(nn.Module):
            def __init__(self):
                super().__init__()
                self.embedding = nn.Embedding(V + 1, P)
                self.lstm = nn.LSTM(P, P, num_layers=mc["pred_layers"], batch_first=True)
                self.decoder_projector = nn.Linear(P, P)

        class Joint(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(P, V + 1 + len(mc["durations"]))
                self.activation = nn.ReLU()

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = Enc()
                self.encoder_projector = nn.Linear(D, P)
                self.decoder = Dec()
                self.joint = Joint()
                self.config = Cfg()
                self.config.blank_token_id = V
                self.config.durations = list(mc["durations"])
                self.config.vocab_size = V + 1

        m = M()
        init_weights_(m, V)
        return m


# ----------------------------------------------------------------------------------------------
# data on the GPU


class GpuCorpus:
    """All clips of one corpus directory as one int16 tensor on the device, plus token targets."""

    def __init__(self, torch, d, device, sp=None, log=print):
        audio, offsets, meta = corpus.load(d)
        self.meta = meta
        self.n = len(meta)
        self.lengths = np.diff(offsets)
        self.texts = [m["text"] for m in meta]
        self.voices = [m["voice"] for m in meta]
        self.seen = [bool(m.get("seen_voice", True)) for m in meta]
        self.audio = torch.from_numpy(audio).to(device)
        self.off = torch.from_numpy(offsets[:-1].astype(np.int64)).to(device)
        self.len = torch.from_numpy(self.lengths.astype(np.int64)).to(device)
        self.device = device
        self.torch = torch
        log(f"corpus {os.path.basename(d)}: {self.n} clips, {self.lengths.sum() / corpus.SR_OUT / 3600:.2f} h, "
            f"{audio.nbytes / 2 ** 30:.2f} GiB on {device}")
        self.tgt = None
        if sp is not None:
            self.set_targets(sp)

    def set_targets(self, sp):
        torch = self.torch
        ids = sp.encode(self.texts)
        unk = [i for i, x in enumerate(ids) if 0 in x]
        if unk:
            raise RuntimeError(f"{len(unk)} targets contain <unk>, e.g. {self.texts[unk[0]]!r}")
        U = np.array([len(x) for x in ids], dtype=np.int64)
        pad = np.zeros((self.n, max(1, int(U.max()))), dtype=np.int64)
        for i, x in enumerate(ids):
            pad[i, :len(x)] = x
        self.tgt = torch.from_numpy(pad).to(self.device)
        self.tgt_len = torch.from_numpy(U).to(self.device)
        self.U = U

    def waves(self, idx, shift=None, round_to=1600):
        """[B, N] float32 (zero padded), lengths [B] on the device.  shift: optional numpy array of
        leading-silence samples per clip (training).  Sizes are computed on the host from numpy
        lengths, so building a batch never waits for the GPU."""
        torch = self.torch
        idx = np.asarray(idx, dtype=np.int64)
        lens_np = self.lengths[idx]
        shift_np = np.zeros_like(lens_np) if shift is None else np.asarray(shift, dtype=np.int64)
        N = int((lens_np + shift_np).max())
        N = -(-N // round_to) * round_to  # few distinct FFT sizes (cuFFT plan cache)
        idx_t = torch.from_numpy(idx).to(self.device)
        lens, offs = self.len[idx_t], self.off[idx_t]
        shift_t = torch.from_numpy(shift_np).to(self.device)
        rel = torch.arange(N, device=self.device)[None, :] - shift_t[:, None]
        valid = (rel >= 0) & (rel < lens[:, None])
        gi = (offs[:, None] + rel.clamp(min=0)).clamp(max=self.audio.shape[0] - 1)
        wav = self.audio[gi].float() * (valid.float() / 32768.0)
        return wav, lens + shift_t


def make_batches(lengths, budget_samples, rng, chunk=4096):
    """Batches of similar length: shuffle, sort within chunks, cut when (longest * count) would pass
    the padded-sample budget, shuffle the batch order."""
    n = len(lengths)
    perm = rng.permutation(n)
    batches = []
    for s in range(0, n, chunk):
        idx = perm[s:s + chunk]
        idx = idx[np.argsort(lengths[idx], kind="stable")]
        cur, cur_max = [], 0
        for i in idx:
            L = int(lengths[i])
            m = max(cur_max, L)
            if cur and m * (len(cur) + 1) > budget_samples:
                batches.append(cur)
                cur, m = [], L
            cur.append(int(i))
            cur_max = m
        if cur:
            batches.append(cur)
    order = rng.permutation(len(batches))
    return [batches[k] for k in order]


def augment(torch, wav, lens, gen, noise_prob):
    """Random gain (-24..0 dB; clips are stored at peak 0.9) and, with probability noise_prob,
    coloured Gaussian noise (spectral slope f^-a/2, a in [0, 1.5]: white to beyond pink) at 10-40 dB
    SNR relative to the clip's RMS."""
    B, N = wav.shape
    dev = wav.device
    valid = (torch.arange(N, device=dev)[None, :] < lens[:, None]).float()
    rms = torch.sqrt((wav * wav).sum(1) / lens.clamp(min=1).float() + 1e-12)
    noise = torch.randn(B, N, device=dev, generator=gen)
    alpha = torch.rand(B, 1, device=dev, generator=gen) * 1.5
    X = torch.fft.rfft(noise, dim=1)
    f = torch.arange(X.shape[1], device=dev).float() * (16000.0 / N)
    X = X * ((f.clamp(min=50.0) / 1000.0)[None, :] ** (-alpha / 2))
    noise = torch.fft.irfft(X, n=N, dim=1)
    noise = noise / torch.sqrt((noise * noise).mean(1, keepdim=True) + 1e-12)
    snr = 10.0 + 30.0 * torch.rand(B, 1, device=dev, generator=gen)
    on = (torch.rand(B, 1, device=dev, generator=gen) < noise_prob).float()
    wav = wav + on * noise * (rms[:, None] / 10 ** (snr / 20)) * valid
    gain = 10 ** (-24.0 * torch.rand(B, 1, device=dev, generator=gen) / 20)
    return wav * gain


def spec_augment(torch, feats, fmask, gen):
    """Two frequency masks (<= 15 of the mel bins) and two time masks (<= 5 % of the clip, <= 25 frames)
    per clip, set to 0 (the mean after normalisation)."""
    B, F_, M = feats.shape
    dev = feats.device
    arM = torch.arange(M, device=dev)[None, :]
    arF = torch.arange(F_, device=dev)[None, :]
    for _ in range(2):
        w = (torch.rand(B, device=dev, generator=gen) * 16).long()
        f0 = (torch.rand(B, device=dev, generator=gen) * (M - w).float()).long()
        m = (arM >= f0[:, None]) & (arM < (f0 + w)[:, None])
        feats = feats.masked_fill(m[:, None, :], 0.0)
    L = fmask.sum(1).float()
    for _ in range(2):
        w = (torch.rand(B, device=dev, generator=gen) * torch.clamp(0.05 * L, max=25.0)).long()
        t0 = (torch.rand(B, device=dev, generator=gen) * (L - w.float()).clamp(min=1.0)).long()
        m = (arF >= t0[:, None]) & (arF < (t0 + w)[:, None])
        feats = feats.masked_fill(m[:, :, None], 0.0)
    return feats


# ----------------------------------------------------------------------------------------------
# forward pieces


def encoder_forward(model, feats, fmask):
    """ParakeetEncoder.forward with one change for padded batches: the attention mask hides padded
    KEYS only.  transformers masks padded query rows too, so those rows have no key left, their
    softmax is 0/0 = NaN (eager attention; SDPA depends on the kernel), and at the next layer the NaN
    values at padded positions reach every valid frame through attention (0 weight x NaN = NaN).  With
    keys-only masking, valid frames are computed exactly as without padding (checked by
    selftest_encoder) and padded frames stay finite.  The convolution module derives the same padded
    positions from either mask.  Returns (hidden [B, T, D], valid frames T_b [B])."""
    import torch

    enc = model.encoder
    if getattr(enc, "streaming", False):  # streaming.Encoder: its selected [L, R] pair
        return enc(feats, fmask)
    if not hasattr(enc, "subsampling"):  # the --dev-mock encoder
        o = enc(input_features=feats, attention_mask=fmask)
        return o.last_hidden_state, o.attention_mask.sum(-1).long()
    h = enc.subsampling(feats, fmask)
    h = h * enc.input_scale
    pos = enc.encode_positions(h)
    h = torch.nn.functional.dropout(h, p=getattr(enc, "dropout", 0.0), training=enc.training)
    pos = torch.nn.functional.dropout(pos, p=getattr(enc, "dropout_positions", 0.0), training=enc.training)
    out_mask = enc._get_output_attention_mask(fmask, target_length=h.shape[1])
    T = h.shape[1]
    am = out_mask[:, None, None, :].expand(-1, 1, T, -1)
    for layer in enc.layers:
        h = layer(h, attention_mask=am, position_embeddings=pos)
        if isinstance(h, tuple):
            h = h[0]
    return h, out_mask.sum(-1).long()


def encode(model, feats, fmask):
    """Encoder + encoder_projector; returns (f [B, T, P], T_b [B])."""
    h, Tb = encoder_forward(model, feats, fmask)
    return model.encoder_projector(h), Tb


def predict(model, dec_in):
    """Prediction network on [blank, y1, ...]: [B, U+1, P]."""
    out, _ = model.decoder.lstm(model.decoder.embedding(dec_in))
    return model.decoder.decoder_projector(out)


def joint(model, f, g):
    """[B, T, P] x [B, U+1, P] -> [B, T, U+1, V+1+ND] (transformers' ParakeetTDTJointNetwork)."""
    return model.joint.head(joint_activation(model)(f[:, :, None, :] + g[:, None, :, :]))


# ----------------------------------------------------------------------------------------------
# evaluation


def transcribe(torch, tdt, model, data, idx, mel_fb, batch=48):
    """Greedy spec-6.4 decoding of clips idx (fp32, no augmentation); returns id lists in idx order."""
    was = model.training
    model.eval()
    if getattr(model.encoder, "streaming", False):
        import streaming

        heads = streaming.heads(tdt, model)
    else:
        heads = tdt.Heads(model.decoder.embedding, model.decoder.lstm, model.decoder.decoder_projector,
                          model.joint.head, joint_activation(model), model.config.blank_token_id, DURATIONS)
    order = sorted(range(len(idx)), key=lambda k: data.lengths[idx[k]])
    res = [None] * len(idx)
    with torch.no_grad():
        for s in range(0, len(order), batch):
            sel = order[s:s + batch]
            wav, lens = data.waves([idx[k] for k in sel])
            feats, fmask = tdt.log_mel(wav, lens, mel_fb)
            f, Tb = encode(model, feats, fmask)
            out = tdt.greedy_tdt(heads, f.float(), Tb, max_symbols=10)
            for k, o in zip(sel, out):
                res[k] = o["ids"]
    model.train(was)
    return res


def evaluate(torch, tdt, model, data, idx, sp, mel_fb, log, title, per_voice=False):
    import wer as wermod

    t0 = time.time()
    hyps = transcribe(torch, tdt, model, data, idx, mel_fb)
    rows = [(data.voices[i], data.seen[i], data.texts[i], sp.decode(h)) for i, h in zip(idx, hyps)]
    if per_voice:
        log(f"{title}: per-voice WER on {len(idx)} held-out clips (spec 6.4 greedy, fp32):")
        total, _, lines = wermod.score(rows, log=lambda s: log("  " + s))
    else:
        total = wermod.Tally()
        for r in rows:
            total.add(r[2], r[3])
        lines = []
    log(f"{title}: WER {100 * total.rate():.2f}% on {len(idx)} clips ({time.time() - t0:.1f} s)")
    return total.rate(), rows, lines


def eval_subset(data, n, seed=5):
    """A fixed subset of held-out clips covering every voice."""
    rng = np.random.default_rng(seed)
    return sorted(rng.permutation(data.n)[:min(n, data.n)].tolist())


# ----------------------------------------------------------------------------------------------
# checkpoints


def save_ckpt(torch, out_dir, model, opt, meta, spm_bytes, log):
    sd = {k: (v.detach().float().cpu() if v.is_floating_point() else v.detach().cpu())
          for k, v in model.state_dict().items()}
    sq = {}
    names = {p: n for n, p in model.named_parameters()}
    for p, st in opt.state.items():
        if "exp_avg_sq" in st and p in names:
            sq[names[p]] = st["exp_avg_sq"].detach().to(torch.bfloat16).cpu()
    obj = {"format": "vkasr-train-ckpt-1", "meta_json": json.dumps(meta), "model": sd, "exp_avg_sq": sq,
           "spm": torch.tensor(list(spm_bytes), dtype=torch.uint8)}
    bio = io.BytesIO()
    torch.save(obj, bio)
    data = bio.getvalue()
    for old in glob.glob(os.path.join(out_dir, "ckpt.pt.[0-9][0-9]")):
        os.remove(old)
    parts = []
    for k, s in enumerate(range(0, len(data), PART_BYTES)):
        p = os.path.join(out_dir, f"ckpt.pt.{k:02d}")
        with open(p, "wb") as f:
            f.write(data[s:s + PART_BYTES])
        parts.append(p)
    log(f"checkpoint: {len(data) / 1e6:.1f} MB in {len(parts)} parts {out_dir}/ckpt.pt.NN "
        f"(sha256 {hashlib.sha256(data).hexdigest()[:16]}), step {meta['step']}, progress {meta['progress']:.3f}")
    return parts


def load_ckpt(torch, path, log):
    if os.path.isdir(path):
        parts = sorted(glob.glob(os.path.join(path, "ckpt.pt.[0-9][0-9]")))
    else:
        base = path[:-2] if path[-2:].isdigit() else path + "."
        parts = sorted(glob.glob(glob.escape(base) + "[0-9][0-9]"))
    if not parts:
        raise RuntimeError(f"--resume {path}: no ckpt.pt.NN parts found")
    data = b"".join(open(p, "rb").read() for p in parts)
    obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    if obj.get("format") != "vkasr-train-ckpt-1":
        raise RuntimeError(f"{parts[0]}: not a vkasr training checkpoint")
    meta = json.loads(obj["meta_json"])
    log(f"resume: {len(parts)} parts, {len(data) / 1e6:.1f} MB (sha256 {hashlib.sha256(data).hexdigest()[:16]}), "
        f"step {meta['step']}, progress {meta['progress']:.3f}, {meta['train_seconds']:.0f} s trained")
    return obj, meta, bytes(obj["spm"].tolist())


def restore_optimizer(torch, model, opt, sq):
    """AdamW state from saved second moments: one zero-learning-rate step with zero gradients creates
    the state in whatever layout this torch version uses, then exp_avg_sq is overwritten (exp_avg
    restarts at zero, which only shrinks the first updates)."""
    lrs = [g["lr"] for g in opt.param_groups]
    for g in opt.param_groups:
        g["lr"] = 0.0
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)
    for g, lr in zip(opt.param_groups, lrs):
        g["lr"] = lr
    n = 0
    for name, p in model.named_parameters():
        st = opt.state.get(p)
        if st is not None and name in sq and st["exp_avg_sq"].shape == sq[name].shape:
            st["exp_avg_sq"].copy_(sq[name].float())
            n += 1
    return n


def set_step(opt, step):
    for st in opt.state.values():
        if "step" in st:
            if hasattr(st["step"], "fill_"):
                st["step"].fill_(float(step))
            else:
                st["step"] = step


# ----------------------------------------------------------------------------------------------
# export


def write_parts(out_dir, name, data, log):
    parts = []
    for old in glob.glob(os.path.join(out_dir, glob.escape(name) + ".part[0-9][0-9]")):
        os.remove(old)
    for k, s in enumerate(range(0, len(data), PART_BYTES)):
        p = os.path.join(out_dir, f"{name}.part{k:02d}")
        with open(p, "wb") as f:
            f.write(data[s:s + PART_BYTES])
        parts.append(os.path.basename(p))
    log(f"wrote {name} ({len(data) / 1e6:.1f} MB) as {parts}; join with: cat {name}.part* > {name}")
    return parts


def tar_dir(src_dir, arcroot, extra=None):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w:gz", compresslevel=6) as tf_:
        tf_.add(src_dir, arcname=arcroot)
        for arc, blob in (extra or {}).items():
            ti = tarfile.TarInfo(arc)
            ti.size = len(blob)
            ti.mtime = int(time.time())
            tf_.addfile(ti, io.BytesIO(blob))
    return bio.getvalue()


def export_hf(torch, tf, model, tok, mel_fb_fe, hf_dir, log):
    V = model.config.blank_token_id
    gc = model.generation_config
    gc.decoder_start_token_id = V
    gc.suppress_tokens = list(range(V + 1, V + 1 + len(DURATIONS)))
    try:
        model.save_pretrained(hf_dir)
    except Exception as e:  # noqa: BLE001 - fall back to the two files every reader needs
        log(f"export: save_pretrained failed ({type(e).__name__}: {e}); writing config.json + model.safetensors")
        from safetensors.torch import save_file

        save_file({k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()},
                  os.path.join(hf_dir, "model.safetensors"), metadata={"format": "pt"})
        model.config.to_json_file(os.path.join(hf_dir, "config.json"))
    fe = mel_fb_fe
    try:
        try:
            proc = tf.ParakeetProcessor(feature_extractor=fe, tokenizer=tok, decoder_type="tdt")
        except (TypeError, ValueError):
            proc = tf.ParakeetProcessor(feature_extractor=fe, tokenizer=tok)
        proc.save_pretrained(hf_dir)
    except Exception as e:  # noqa: BLE001 - tokenizer.json and preprocessor_config.json are what readers need
        log(f"export: ParakeetProcessor failed ({type(e).__name__}: {e}); saving tokenizer and extractor apart")
        tok.save_pretrained(hf_dir)
        fe.save_pretrained(hf_dir)
    files = sorted(os.listdir(hf_dir))
    need = ["config.json", "tokenizer.json"]
    missing = [f for f in need if f not in files]
    if not any(f.endswith(".safetensors") for f in files):
        missing.append("model.safetensors")
    if "preprocessor_config.json" not in files and "processor_config.json" not in files:
        missing.append("preprocessor_config.json or processor_config.json")
    if missing:
        raise RuntimeError(f"export: {hf_dir} lacks {missing} (has {files})")
    tj = json.load(open(os.path.join(hf_dir, "tokenizer.json")))
    if len(tj["model"]["vocab"]) != V:
        raise RuntimeError(f"export: tokenizer.json model.vocab has {len(tj['model']['vocab'])} pieces, not {V}")
    log(f"export: {hf_dir}: {files}")
    return files


def check_reload(torch, tf, tdt, model, hf_dir, data, idx, mel_fb, sp, log):
    """Reloads the exported directory and checks encoder output and greedy tokens against the
    in-memory model; then compares transformers' generate() with the spec 6.4 decoder."""
    dev = next(model.parameters()).device
    V = model.config.blank_token_id
    try:
        m2 = tf.ParakeetForTDT.from_pretrained(hf_dir, dtype=torch.float32)
    except TypeError:
        m2 = tf.ParakeetForTDT.from_pretrained(hf_dir, torch_dtype=torch.float32)
    m2 = m2.to(dev).eval()
    model.eval()
    wav, lens = data.waves(idx)
    feats, fmask = tdt.log_mel(wav, lens, mel_fb)
    with torch.no_grad():
        f1, T1 = encode(model, feats, fmask)
        f2, T2 = encode(m2, feats, fmask)
    err = float((f1 - f2).abs().max())
    if err > 1e-4 or not torch.equal(T1, T2):
        raise RuntimeError(f"reload: encoder output differs by {err}")
    a = transcribe(torch, tdt, model, data, idx, mel_fb)
    b = transcribe(torch, tdt, m2, data, idx, mel_fb)
    if a != b:
        raise RuntimeError("reload: greedy tokens differ between the trained and the reloaded model")
    tok2 = tf.AutoTokenizer.from_pretrained(hf_dir)
    if tok2.convert_ids_to_tokens(list(range(V))) != [sp.id_to_piece(i) for i in range(V)]:
        raise RuntimeError("reload: the saved tokenizer's pieces differ from SentencePiece")
    bad = sum(corpus.normalize_text(hf_decode(tok2, ids)) != corpus.normalize_text(sp.decode(ids)) for ids in a)
    log(f"reload: {hf_dir} loads; encoder max diff {err:.1e}, greedy tokens identical, tokenizer pieces identical, "
        f"decode differs from SentencePiece on {bad}/{len(a)} transcripts")
    # transformers' generate (one unpadded clip at a time: see clean_clips): the same tokens except where
    # the spec's per-frame symbol cap, which transformers' TDT lacks, acts
    agree, tried = 0, 0
    try:
        for i in clean_clips(data, 8):
            w1, l1 = data.waves([i], round_to=1)
            f1, m1 = tdt.log_mel(w1, l1, mel_fb)
            with torch.no_grad():
                g = m2.generate(input_features=f1, attention_mask=m1, return_dict_in_generate=True)
            seq = (g.sequences if hasattr(g, "sequences") else g)[0].tolist()
            hf_ids = [int(x) for x in seq if int(x) < V and int(x) != model.config.pad_token_id]
            ours = transcribe(torch, tdt, model, data, [i], mel_fb)[0]
            agree += hf_ids == ours
            tried += 1
        log(f"transformers generate(): {agree}/{tried} clips give the same tokens as the spec 6.4 decoder")
    except Exception as e:  # informative only: parity with transformers is tested elsewhere
        log(f"transformers generate() comparison skipped: {type(e).__name__}: {str(e)[:200]}")
    model.train()
    return agree, tried


def check_reload_stream(torch, tdt, stream, model, hf_dir, data, idx, mel_fb, log):
    """Reloads the exported streaming directory with streaming.load_hf (encoder output and greedy tokens
    as the in-memory model's); then, where transformers has NemotronAsrStreamingForRNNT, compares its
    encoder on the same directory, per lookahead, on clips alone (the layout check)."""
    dev = next(model.parameters()).device
    m2 = stream.load_hf(hf_dir).to(dev)
    model.eval()
    wav, lens = data.waves(idx)
    feats, fmask = tdt.log_mel(wav, lens, mel_fb)
    with torch.no_grad():
        f1, T1 = encode(model, feats, fmask)
        f2, T2 = encode(m2, feats, fmask)
    err = float((f1 - f2).abs().max())
    if err > 1e-4 or not torch.equal(T1, T2):
        raise RuntimeError(f"reload: encoder output differs by {err}")
    if transcribe(torch, tdt, model, data, idx, mel_fb) != transcribe(torch, tdt, m2, data, idx, mel_fb):
        raise RuntimeError("reload: greedy tokens differ between the trained and the reloaded model")
    log(f"reload: {hf_dir} loads; encoder max diff {err:.1e}, greedy tokens identical")
    ctx0 = model.encoder.ctx
    try:
        tf = import_hf()
        cls = getattr(tf, "NemotronAsrStreamingForRNNT")
        try:
            hf = cls.from_pretrained(hf_dir, dtype=torch.float32)
        except TypeError:
            hf = cls.from_pretrained(hf_dir, torch_dtype=torch.float32)
        hf = hf.to(dev).eval()
        for lr in model.mc["menu"]:
            worst = 0.0
            for i in idx[:4]:
                w1, l1 = data.waves([i], round_to=1)
                x, m = tdt.log_mel(w1, l1, mel_fb)
                n = int(m.sum())
                model.encoder.ctx = lr
                with torch.no_grad():
                    ours, _ = encoder_forward(model, x[:, :n], m[:, :n])
                    got = hf.encoder(input_features=x[:, :n], num_lookahead_tokens=lr[1]).last_hidden_state
                rel = float((got - ours).norm() / ours.norm()) if got.shape == ours.shape else math.inf
                worst = max(worst, rel)
            log(f"transformers NemotronAsrStreamingForRNNT on the export, [{lr[0]}, {lr[1]}]: encoder relative "
                f"difference {worst:.1e} (4 clips)")
    except Exception as e:  # informative: vkasr's own tests check the layout against its reference
        log(f"transformers comparison skipped: {type(e).__name__}: {str(e)[:200]}")
    model.encoder.ctx = ctx0
    model.train()
    return True


# ----------------------------------------------------------------------------------------------
# self-tests that need the model / transformers


def selftest_frontend(torch, tdt, tf, data, mel_fb, device, log):
    """Our batched device log-mel == transformers' ParakeetFeatureExtractor (CPU) on three clips."""
    idx = [0, min(1, data.n - 1), min(2, data.n - 1)]
    fe = tf.ParakeetFeatureExtractor(feature_size=mel_fb.shape[0], sampling_rate=16000, hop_length=160, n_fft=512,
                                     win_length=400, preemphasis=0.97, padding_value=0.0)
    wav, lens = data.waves(idx)
    ours, om = tdt.log_mel(wav, lens, mel_fb)
    clips = [wav[k, :int(lens[k])].cpu().numpy() for k in range(len(idx))]
    ref = fe(clips, sampling_rate=16000, return_tensors="pt", return_attention_mask=True)
    rf, rm = ref["input_features"], ref["attention_mask"].bool()
    F_ = rf.shape[1]
    if not torch.equal(om[:, :F_].cpu(), rm) or bool(om[:, F_:].any()):
        raise RuntimeError("front end: valid-frame mask differs from ParakeetFeatureExtractor")
    d = (ours[:, :F_].cpu() - rf).abs()
    worst = float(d.max())
    if worst > 2e-3 or float(d.mean()) > 1e-4:
        raise RuntimeError(f"front end differs from ParakeetFeatureExtractor: max {worst:.2e}, mean {float(d.mean()):.2e}")
    log(f"front end: == ParakeetFeatureExtractor (max abs diff {worst:.1e} over {int(rm.sum())} frames)")
    return fe


def clean_clips(data, n):
    """Clips whose valid mel frames L = N // 160 are not a multiple of 8: alone and unpadded they have
    no padded encoder frame (the extractor's extra STFT frame adds one exactly when L % 8 == 0), so
    transformers' encoder has no fully masked attention row on them (see encoder_forward)."""
    out = [i for i in range(data.n) if (int(data.lengths[i]) // 160) % 8 != 0]
    return out[:n]


def selftest_encoder(torch, model, data, idx, mel_fb, tdt, log):
    """encoder_forward == transformers' ParakeetEncoder on each clip alone, and a padded batch gives
    the same valid frames; reports whether transformers' own batched forward is finite."""
    model.eval()
    with torch.no_grad():
        wav, lens = data.waves(idx)
        feats, fmask = tdt.log_mel(wav, lens, mel_fb)
        hb, Tb = encoder_forward(model, feats, fmask)
        worst_single, worst_batch = 0.0, 0.0
        for k in range(len(idx)):
            w1, l1 = data.waves([idx[k]], round_to=1)  # unpadded, as a single-file user would run it
            f1, m1 = tdt.log_mel(w1, l1, mel_fb)
            ref = model.encoder(input_features=f1, attention_mask=m1).last_hidden_state
            ours, T1 = encoder_forward(model, f1, m1)
            t = int(T1[0])
            if int(Tb[k]) != t:
                raise RuntimeError(f"encoder: clip {k} has {t} frames alone, {int(Tb[k])} in a batch")
            worst_single = max(worst_single, float((ours[0, :t] - ref[0, :t]).abs().max()))
            worst_batch = max(worst_batch, float((hb[k, :t] - ref[0, :t]).abs().max()))
        hf_b = model.encoder(input_features=feats, attention_mask=fmask).last_hidden_state
        hf_finite = bool(torch.isfinite(hf_b).all())
    model.train()
    if worst_single > 1e-5 or worst_batch > 1e-3 or not torch.isfinite(hb).all():
        raise RuntimeError(f"encoder_forward differs from ParakeetEncoder: alone {worst_single:.2e}, "
                           f"batched {worst_batch:.2e}")
    log(f"encoder: keys-only masking == ParakeetEncoder on single clips (max diff {worst_single:.1e}), padded "
        f"batch valid frames max diff {worst_batch:.1e}; transformers' own padded batch output "
        f"{'is finite' if hf_finite else 'has NaN/Inf (why encoder_forward masks keys only)'}")


def selftest_joint(torch, model, data, idx, mel_fb, tdt, log):
    """Our encoder/prediction/joint composition == ParakeetForTDT.forward(decoder_input_ids=...)."""
    model.eval()
    wav, lens = data.waves(idx, round_to=1)
    feats, fmask = tdt.log_mel(wav, lens, mel_fb)
    U = int(data.tgt_len[idx].max())
    V = model.config.blank_token_id
    dec_in = torch.cat([torch.full((len(idx), 1), V, device=wav.device, dtype=torch.long),
                        data.tgt[idx, :U]], dim=1)
    with torch.no_grad():
        f, Tb = encode(model, feats, fmask)
        ours = joint(model, f, predict(model, dec_in))
        try:
            hf = model(input_features=feats, attention_mask=fmask, decoder_input_ids=dec_in).logits
        except Exception as e:
            log(f"joint: ParakeetForTDT.forward(decoder_input_ids=...) not usable here ({type(e).__name__}: "
                f"{str(e)[:120]}); skipped")
            model.train()
            return
    model.train()
    if hf.shape != ours.shape:
        log(f"joint: ParakeetForTDT.forward gives shape {tuple(hf.shape)}, ours {tuple(ours.shape)}; skipped")
        return
    err = float((hf - ours).abs().max())
    if err > 1e-3:
        raise RuntimeError(f"joint: our composition differs from ParakeetForTDT.forward by {err}")
    log(f"joint: == ParakeetForTDT.forward (max abs diff {err:.1e})")


# ----------------------------------------------------------------------------------------------
# main


def main(argv=None):
    a = parse_args(argv)
    t_start = time.time()
    deadline = t_start + a.minutes * 60.0
    out_dir = os.path.abspath(a.out)
    os.makedirs(out_dir, exist_ok=True)
    art_dir = out_dir if not a.smoke else os.path.join(a.work, "smoke-artifacts")  # smoke: big files stay in /tmp
    os.makedirs(art_dir, exist_ok=True)
    log = Log(os.path.join(out_dir, "train-log.txt"))
    log(f"vkasr train.py: {' '.join(sys.argv[1:])}")
    log(f"host {platform.node()} python {platform.python_version()} numpy {np.__version__} cpus {os.cpu_count()}")
    info = {"args": vars(a), "corpus_version": corpus.CORPUS_VERSION}

    # 1. corpus, before torch is imported (spawned workers import only numpy + corpus.py)
    lex = corpus.Lexicon()
    log(f"lexicon: {lex.lemma_count()} lemmas, {len(lex.surface_forms())} surface forms (words.txt sha256 "
        f"{lex.sha256[:12]})")
    block = 64 if a.smoke else 512
    train_dir = corpus.build(a.work, "train", hours=a.hours, workers=a.workers, block_size=block, log=log)
    held_dir = corpus.build(a.work, "heldout", per_voice=a.heldout_per_voice, workers=a.workers, log=log)

    import torch

    import tdt

    tf = None if (a.dev_mock or a.streaming) else import_hf()
    stream = None
    if a.streaming:
        import streaming as stream

        menu = stream.parse_menu(a.menu)
        tdt.set_front_end(0.0, False)  # NeMo's streaming models: normalize NA, no pre-emphasis
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    what = ", streaming model (no transformers)" if a.streaming else ", MOCK model (no transformers)"
    log(f"torch {torch.__version__}" + (f", transformers {tf.__version__}" if tf else what) +
        f", device {torch.cuda.get_device_name(0) if cuda else 'cpu'}")
    torch.manual_seed(a.seed)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 paths (front end, eval) stay fp32
        torch.backends.cudnn.allow_tf32 = False

    # 2. self-tests that need no model
    tdt.selftest_loss(log=log)
    tdt.selftest_greedy(log=log)
    if stream:
        stream.selftest_loss(log=log)
        stream.selftest_reference(ROOT, log=log)

    # 3. vocabulary
    ckpt, meta0 = None, None
    tr = GpuCorpus(torch, train_dir, device, log=log)
    ho = GpuCorpus(torch, held_dir, device, log=log)
    if a.resume:
        ckpt, meta0, spm_bytes = load_ckpt(torch, a.resume, log)
    elif a.init:
        spm_bytes = stream.spm_from_gguf(stream.read_gguf(a.init)[0])
        log(f"vocabulary: the pieces of {a.init}")
    else:
        spm_bytes = train_spm(tr.texts, a.vocab, a.smoke, log)
    sp = load_spm(spm_bytes)
    V = sp.get_piece_size()
    tr.set_targets(sp)
    ho.set_targets(sp)
    log(f"targets: V = {V}; train U mean {tr.U.mean():.1f} max {tr.U.max()}, "
        f"{tr.U.sum() / (tr.lengths.sum() / 16000):.2f} tokens/s of audio")
    spm_path = os.path.join(a.work, "spm.model")
    with open(spm_path, "wb") as f:
        f.write(spm_bytes)

    # 4. model
    mc = meta0["model_config"] if meta0 else model_config_from_args(a, V)
    if stream and not meta0:
        mc.update(streaming=True, menu=menu, durations=[])
    if stream:
        menu = mc["menu"]  # a resumed run keeps its checkpoint's menu
    if mc["vocab"] != V:
        fail(log, f"checkpoint model has vocab {mc['vocab']}, its SentencePiece model {V}")
    if meta0:
        log(f"resume: model configuration from the checkpoint: {mc}")

    def new_model(mc):
        if mc.get("streaming"):
            return stream.build(mc)
        return MockTDT.build(mc) if a.dev_mock else build_model(tf, mc, log)

    if bool(mc.get("streaming")) != bool(stream):
        fail(log, "--streaming must match the checkpoint's model")
    model = new_model(mc)
    if a.init and ckpt is None:
        stream.init_from_gguf(model, a.init, log)
    if ckpt is not None:
        missing, unexpected = model.load_state_dict(ckpt["model"], strict=False)
        if missing or unexpected:
            fail(log, f"checkpoint does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.to(device).train()
    n_params, gguf_est = size_report(model, log)
    info.update({"model_config": mc, "parameters": n_params, "gguf_f16_estimate_bytes": gguf_est})

    # 5. self-tests with the model
    tok, fe = None, None
    mel_fb = None
    if tf is not None:
        tok = build_hf_tokenizer(tf, spm_path, V, sp, tr.texts, log)
        fe = tf.ParakeetFeatureExtractor(feature_size=mc["mels"], sampling_rate=16000, hop_length=160, n_fft=512,
                                         win_length=400, preemphasis=0.97, padding_value=0.0)
        mel_fb = fe.mel_filters.to(torch.float32).to(device)
        selftest_frontend(torch, tdt, tf, ho, mel_fb, device, log)
        selftest_encoder(torch, model, ho, clean_clips(ho, 4), mel_fb, tdt, log)
        selftest_joint(torch, model, ho, clean_clips(ho, 1), mel_fb, tdt, log)
    else:
        sys.path.append(STUBS)
        import librosa  # the stand-in

        mel_fb = torch.from_numpy(librosa.filters.mel(sr=16000, n_fft=512, n_mels=mc["mels"], fmin=0.0,
                                                      fmax=8000.0, norm="slaney")).float().to(device)

    # 6. optimiser and schedule state
    decay, no_decay = [], []
    for n_, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embedding" not in n_ else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.98), eps=1e-9, fused=cuda)
    except TypeError:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.98), eps=1e-9)
    step = meta0["step"] if meta0 else 0
    progress0 = meta0["progress"] if meta0 else 0.0
    train_seconds0 = meta0["train_seconds"] if meta0 else 0.0
    epoch = meta0.get("epoch", 0) if meta0 else 0
    history = meta0.get("history", []) if meta0 else []
    if ckpt is not None and ckpt.get("exp_avg_sq"):
        n = restore_optimizer(torch, model, opt, ckpt["exp_avg_sq"])
        set_step(opt, step)
        log(f"resume: AdamW second moments restored for {n} tensors (first moments restart at zero)")
    del ckpt

    blank = V
    eval_idx = eval_subset(ho, a.eval_subset)
    # seconds kept for what follows training: evaluation + checkpoint (~15 s), or evaluation of the whole
    # held-out set, export, reload check, generate() comparison and archives (~45 s); margins for slow I/O
    reserve = 25.0 if a.smoke else (100.0 if (a.final or a.export) else 45.0)
    if a.reserve is not None:
        reserve = a.reserve
    train_end = deadline - reserve
    t_train0 = time.time()
    budget = max(1.0, train_end - t_train0)
    if a.final:
        p_end = 1.0
    else:
        p_end = min(1.0, progress0 + budget / (a.total_train_minutes * 60.0))
    log(f"schedule: progress {progress0:.3f} -> {p_end:.3f} over {budget:.0f} s of training; peak lr {a.lr}, "
        f"warm-up {a.warmup_steps} steps, batches of {a.batch_seconds:.0f} padded seconds")

    def lr_at(p, step, run_steps):
        warm = min(1.0, (step + 1) / a.warmup_steps)
        rewarm = min(1.0, (run_steps + 1) / 30.0) if meta0 else 1.0
        cos = a.final_lr_frac + (1 - a.final_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, p)))
        return a.lr * warm * rewarm * cos

    gen = torch.Generator(device=device)
    gen.manual_seed(a.seed + step)
    rng = np.random.default_rng(a.seed + step)
    budget_samples = int(a.batch_seconds * corpus.SR_OUT)
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16) if cuda else torch.autocast(
        device_type="cpu", dtype=torch.bfloat16, enabled=False)

    # 7. training
    run_steps, skipped = 0, 0
    stats = {"loss": torch.zeros((), device=device), "tok": 0, "utts": 0, "audio": 0.0, "n": 0}
    t_log = t_eval = time.time()
    progress = progress0
    stop = a.export_only
    while not stop:
        batches = make_batches(tr.lengths, budget_samples, rng)
        for bidx in batches:
            now = time.time()
            if now >= train_end or (a.max_steps is not None and run_steps >= a.max_steps):
                stop = True
                break
            progress = progress0 + (p_end - progress0) * min(1.0, (now - t_train0) / budget)
            if stream:  # one attention context per batch, uniformly (NeMo's multi-lookahead training)
                model.encoder.ctx = menu[int(rng.integers(0, len(menu)))]
            lr = lr_at(progress, step, run_steps)
            for g in opt.param_groups:
                g["lr"] = lr
            shift = rng.integers(0, int(0.25 * corpus.SR_OUT), size=len(bidx))
            wav, lens = tr.waves(bidx, shift)
            wav = augment(torch, wav, lens, gen, a.noise_prob)
            feats, fmask = tdt.log_mel(wav, lens, mel_fb)
            if not a.no_specaug and progress > 0.05:
                feats = spec_augment(torch, feats, fmask, gen)
            idx_t = torch.as_tensor(bidx, device=device)
            Ub = tr.tgt_len[idx_t]
            U = int(tr.U[bidx].max())  # host-side sizes: no GPU sync
            ntok = int(tr.U[bidx].sum())
            tgt = tr.tgt[idx_t, :U]
            dec_in = torch.cat([torch.full((len(bidx), 1), blank, dtype=torch.long, device=device), tgt], dim=1)
            gp = predict(model, dec_in)  # fp32: small, and keeps the LSTM out of bf16
            with autocast:
                f, Tb = encode(model, feats, fmask)
                logits = joint(model, f, gp)
            if stream:
                nll = stream.rnnt_loss(logits, tgt, Tb, Ub, blank)
            else:
                nll = tdt.tdt_loss(logits, tgt, Tb, Ub, blank, DURATIONS, sigma=a.sigma)
            loss = nll.sum() / max(1, ntok)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            emb_grad = model.decoder.embedding.weight.grad
            if emb_grad is not None:
                emb_grad[blank].zero_()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            if not torch.isfinite(gn) or not torch.isfinite(loss):
                skipped += 1
                opt.zero_grad(set_to_none=True)
                if skipped > 50:
                    fail(log, "more than 50 non-finite steps")
                continue
            opt.step()
            step += 1
            run_steps += 1
            stats["loss"] += loss.detach()  # stays on the device: no synchronisation per step
            stats["n"] += 1
            stats["tok"] += ntok
            stats["utts"] += len(bidx)
            stats["audio"] += float(tr.lengths[bidx].sum()) / corpus.SR_OUT
            now = time.time()
            if now - t_log >= a.log_every:
                dt = now - t_log
                mem = torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else 0.0
                log(f"step {step:6d} ep {epoch:3d} loss {float(stats['loss']) / max(1, stats['n']):.4f} lr {lr:.2e} "
                    f"gnorm {float(gn):.2f} | {stats['utts'] / dt:6.0f} utt/s {stats['audio'] / dt:7.0f}x realtime "
                    f"| progress {progress:.3f} | left {train_end - now:5.0f} s | mem {mem:.1f} GiB"
                    + (f" | skipped {skipped}" if skipped else ""))
                stats = {"loss": torch.zeros((), device=device), "tok": 0, "utts": 0, "audio": 0.0, "n": 0}
                t_log = now
            if now - t_eval >= a.eval_every and train_end - now > 30:
                if stream:
                    model.encoder.ctx = menu[0]
                w = guarded(log, "evaluation", lambda: evaluate(torch, tdt, model, ho, eval_idx, sp, mel_fb, log,
                                                                f"eval step {step}")[0])
                history.append({"step": step, "progress": round(progress, 4), "wer": w})
                t_eval = time.time()
        else:
            epoch += 1
            continue
    trained = time.time() - t_train0 if not a.export_only else 0.0
    if stream:
        model.encoder.ctx = menu[0]
    log(f"training stopped: {run_steps} steps this run ({step} total), {trained:.0f} s, epoch {epoch}, "
        f"progress {progress:.3f}")

    # 8. end of chunk: weights are saved before anything else can fail
    meta = {"step": step, "progress": progress if not a.export_only else progress0,
            "train_seconds": train_seconds0 + trained, "epoch": epoch, "model_config": mc, "history": history,
            "args": vars(a), "corpus_version": corpus.CORPUS_VERSION}
    if (not a.final or a.keep_ckpt or a.smoke) and not a.export_only:
        save_ckpt(torch, art_dir, model, opt, meta, spm_bytes, log)
        if a.smoke:  # the resume path: load what was written into a fresh model
            obj, m2, b2 = load_ckpt(torch, art_dir, log)
            fresh = new_model(m2["model_config"])
            fresh.load_state_dict(obj["model"], strict=True)
            fresh.to(device)
            same = all(torch.equal(p.float().cpu(), q.float().cpu()) for p, q in
                       zip(model.state_dict().values(), fresh.state_dict().values()))
            if not same or b2 != spm_bytes:
                fail(log, "smoke: the checkpoint does not restore the model")
            opt2 = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
            n = restore_optimizer(torch, fresh, opt2, obj["exp_avg_sq"])
            log(f"smoke: checkpoint restores the model exactly and {n} AdamW moments")
    w_sub = guarded(log, "evaluation", lambda: evaluate(torch, tdt, model, ho, eval_idx, sp, mel_fb, log,
                                                        f"eval step {step}")[0])
    history.append({"step": step, "progress": round(meta["progress"], 4), "wer": w_sub})
    info.update({"step": step, "train_seconds": meta["train_seconds"], "history": history})
    rc = 0
    if a.final or a.export or a.smoke:
        if stream:  # every lookahead of the menu, the default last (its transcripts go into the sample)
            by_ms = {}
            for lr in menu[1:] + menu[:1]:
                model.encoder.ctx = lr
                ms = (lr[1] + 1) * 80
                full = guarded(log, "final evaluation", lambda: evaluate(
                    torch, tdt, model, ho, list(range(ho.n)), sp, mel_fb, log,
                    f"final evaluation [{lr[0]}, {lr[1]}] (lookahead {ms} ms)", per_voice=True))
                if full is not None:
                    by_ms[ms] = {"context": lr, "wer": full[0], "table": full[2]}
            info["heldout_wer_by_lookahead_ms"] = by_ms
        else:
            full = guarded(log, "final evaluation", lambda: evaluate(torch, tdt, model, ho, list(range(ho.n)), sp,
                                                                     mel_fb, log, "final evaluation", per_voice=True))
        rows = None
        if full is not None:
            w_all, rows, lines = full
            info.update({"heldout_wer": w_all, "heldout_table": lines})
        sample = []
        for i in range(ho.n):  # two clips per voice for the CI candidates
            if sum(1 for s_ in sample if ho.voices[s_] == ho.voices[i]) < 2:
                sample.append(i)
        name = STREAM_NAME if stream else MODEL_NAME
        with tempfile.TemporaryDirectory() as tmp:
            hf_dir = os.path.join(tmp, name)
            os.makedirs(hf_dir)

            def export():
                if stream:
                    files = stream.export_hf(model, hf_dir, [sp.id_to_piece(i) for i in range(V)])
                    log(f"export: {hf_dir}: {files}")
                elif a.dev_mock:
                    torch.save(model.state_dict(), os.path.join(hf_dir, "mock.pt"))
                else:
                    export_hf(torch, tf, model, tok, fe, hf_dir, log)
                info_b = json.dumps(info, indent=1, default=str).encode()
                data = tar_dir(hf_dir, name, {"train_info.json": info_b, "spm.model": spm_bytes})
                write_parts(art_dir, name + ".tar.gz", data, log)
                return True

            if not guarded(log, "export", export):
                log("export failed: writing a checkpoint instead; redo the export with --export-only --resume")
                save_ckpt(torch, art_dir, model, opt, meta, spm_bytes, log)
                rc = 1
            elif stream:
                chk = guarded(log, "reload check", lambda: check_reload_stream(torch, tdt, stream, model, hf_dir, ho,
                                                                               clean_clips(ho, 8), mel_fb, log))
                info["reload_check"] = "ok" if chk is not None else "FAILED (see train-log.txt)"
            elif not a.dev_mock:
                chk = guarded(log, "reload check", lambda: check_reload(torch, tf, tdt, model, hf_dir, ho,
                                                                        sample[:16], mel_fb, sp, log))
                info["reload_check"] = "ok" if chk is not None else "FAILED (see train-log.txt)"
                if chk is not None:
                    info["hf_generate_agreement"] = f"{chk[0]}/{chk[1]}"

            def write_sample():
                sdir = os.path.join(tmp, "heldout-sample")
                os.makedirs(sdir)
                hyp_of = {i: r[3] for i, r in enumerate(rows)} if rows else {}
                with open(os.path.join(sdir, "refs.tsv"), "w") as f:
                    f.write("file\tvoice\tseen_voice\ttext\thyp_train_py\n")
                    for i in sample:
                        m = ho.meta[i]
                        clip = ho.audio[int(ho.off[i]):int(ho.off[i]) + int(ho.len[i])].cpu().numpy()
                        corpus.write_wav(os.path.join(sdir, m["id"] + ".wav"), clip)
                        f.write(f"{m['id']}.wav\t{m['voice']}\t{int(ho.seen[i])}\t{m['text']}\t"
                                f"{corpus.normalize_text(hyp_of.get(i, ''))}\n")
                sdata = tar_dir(sdir, "heldout-sample")
                with open(os.path.join(out_dir, "heldout-sample.tar.gz"), "wb") as f:
                    f.write(sdata)
                log(f"wrote heldout-sample.tar.gz ({len(sample)} clips, {len(sdata) / 1e6:.1f} MB)")

            guarded(log, "held-out sample", write_sample)
        with open(os.path.join(out_dir, "train_info.json"), "w") as f:
            json.dump(info, f, indent=1, default=str)
    for fn in sorted(os.listdir(out_dir)):
        p = os.path.join(out_dir, fn)
        if os.path.isfile(p):
            log(f"  OUT {fn:40s} {os.path.getsize(p) / 2 ** 20:7.2f} MiB")
    log(f"done in {time.time() - t_start:.0f} s (budget {a.minutes * 60:.0f} s)" + (" WITH ERRORS" if rc else ""))
    return rc


if __name__ == "__main__":
    sys.exit(main())
