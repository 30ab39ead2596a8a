"""The cache-aware streaming model of `train.py --streaming`: a FastConformer encoder with causal
subsampling, a causal depthwise conv followed by a LayerNorm, and the chunked_limited attention mask
(one [L, R] pair of a menu per batch, as NeMo's multi-lookahead training samples it), with an RNN-T
head; plain PyTorch, batched, no transformers.  Also: the RNN-T loss, the initialisation from vkasr's
offline GGUF, and the export in transformers' NemotronAsrStreaming layout that `vkasr convert` reads.

Parameter names are Parakeet's (transformers' ParakeetForTDT: encoder.subsampling.layers.N,
encoder.layers.N.self_attn.q_proj, ..., decoder.lstm, joint.head), so train.py's evaluation code runs
on either model.  A padded batch computes every valid frame exactly as the clip alone: padded mel
frames and padded frames after each subsampling stage are zero (a clip alone is zero-padded by the
convolutions), attention masks padded keys, and the causal convolutions never look right.
`python3 tools/train/streaming.py [REPO_ROOT]` runs the self-tests on CPU.
"""

import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures"))
import fxlib  # noqa: E402  (numpy-only helpers shared with the fixture scripts)

NEG = -1.0e30  # finite "log 0", as tdt.py
GGUF_F32, GGUF_F16 = 0, 1


def sub_len(n):
    """Frames after one causal stride-2 stage (pad 2 before, 1 after, kernel 3): floor(n / 2) + 1."""
    return torch.div(n, 2, rounding_mode="floor") + 1


def parse_menu(s):
    """'64,7;64,1;64,0' -> [[64, 7], [64, 1], [64, 0]]; chunked_limited needs L % (R + 1) == 0."""
    menu = []
    for part in s.split(";"):
        l_, r_ = (int(v) for v in part.split(","))
        if l_ < 1 or r_ < 0 or l_ % (r_ + 1) != 0:
            raise ValueError(f"attention context [{l_}, {r_}]: needs L >= 1, R >= 0 and L a multiple of R + 1")
        menu.append([l_, r_])
    if len({l_ for l_, _ in menu}) != 1:
        raise ValueError(f"menu {menu}: every pair must have the same left context (one sliding window)")
    return menu


def chunked_mask(T, lr, device):
    """NeMo's chunked_limited visibility [T, T] (True = visible): chunks of R + 1 frames, a query sees
    its own chunk and L / (R + 1) chunks before it."""
    chunk = lr[1] + 1
    idx = torch.arange(T, device=device) // chunk
    diff = idx[:, None] - idx[None, :]
    return (diff >= 0) & (diff <= lr[0] // chunk)


def rel_pos_emb(T, D, device, dtype=torch.float32):
    """RelPositionalEncoding: positions T-1 .. -(T-1); even columns sin, odd columns cos."""
    pos = torch.arange(T - 1, -T, -1, device=device, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, D, 2, device=device, dtype=torch.float32) * -(math.log(10000.0) / D))
    pe = torch.zeros(2 * T - 1, D, device=device)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe.to(dtype)


def rel_shift(x):
    b, h, qlen, pos_len = x.size()
    x = F.pad(x, pad=(1, 0))
    x = x.view(b, h, -1, qlen)
    return x[:, :, 1:].view(b, h, qlen, pos_len)


class Subsampling(nn.Module):
    """dw_striding x8 with causal padding in time and frequency (NeMo causal_downsampling)."""

    def __init__(self, M, C, D):
        super().__init__()
        self.layers = nn.ModuleList([nn.Conv2d(1, C, 3, stride=2), nn.ReLU(),
                                     nn.Conv2d(C, C, 3, stride=2, groups=C), nn.Conv2d(C, C, 1), nn.ReLU(),
                                     nn.Conv2d(C, C, 3, stride=2, groups=C), nn.Conv2d(C, C, 1), nn.ReLU()])
        F3 = M
        for _ in range(3):
            F3 = F3 // 2 + 1
        self.linear = nn.Linear(C * F3, D)

    def forward(self, x, lens):
        """x [B, T, M] (zero beyond lens), lens [B] -> ([B, T', D], lens')."""
        x = x[:, None]
        L = self.layers
        for stage in ((L[0],), (L[2], L[3]), (L[5], L[6])):
            x = stage[0](F.pad(x, (2, 1, 2, 1)))
            for m in stage[1:]:
                x = m(x)
            x = torch.relu(x)
            lens = sub_len(lens)
            keep = torch.arange(x.shape[2], device=x.device)[None, :] < lens[:, None]
            x = x * keep[:, None, :, None].to(x.dtype)
        b, c, t, f = x.shape
        return self.linear(x.transpose(1, 2).reshape(b, t, c * f)), lens


class FeedForward(nn.Module):
    def __init__(self, D, FF, bias, p):
        super().__init__()
        self.linear1 = nn.Linear(D, FF, bias=bias)
        self.linear2 = nn.Linear(FF, D, bias=bias)
        self.p = p

    def forward(self, x):
        return self.linear2(F.dropout(F.silu(self.linear1(x)), self.p, self.training))


class RelAttention(nn.Module):
    def __init__(self, D, H, bias, p):
        super().__init__()
        self.H, self.dk, self.p = H, D // H, p
        self.q_proj, self.k_proj = nn.Linear(D, D, bias=bias), nn.Linear(D, D, bias=bias)
        self.v_proj, self.o_proj = nn.Linear(D, D, bias=bias), nn.Linear(D, D, bias=bias)
        self.relative_k_proj = nn.Linear(D, D, bias=False)
        self.bias_u = nn.Parameter(torch.zeros(H, D // H))
        self.bias_v = nn.Parameter(torch.zeros(H, D // H))

    def forward(self, x, pe, visible):
        """x [B, T, D], pe [2T-1, D], visible [B, T, T] bool."""
        B, T, _ = x.shape
        H, dk = self.H, self.dk
        q = self.q_proj(x).view(B, T, H, dk)
        k = self.k_proj(x).view(B, T, H, dk).transpose(1, 2)
        v = self.v_proj(x).view(B, T, H, dk).transpose(1, 2)
        pp = self.relative_k_proj(pe).view(1, -1, H, dk).transpose(1, 2)
        ac = torch.matmul((q + self.bias_u).transpose(1, 2), k.transpose(-2, -1))
        bd = rel_shift(torch.matmul((q + self.bias_v).transpose(1, 2), pp.transpose(-2, -1)))[..., :T]
        scores = (ac + bd) / math.sqrt(dk)
        masked = ~visible[:, None]
        attn = torch.softmax(scores.masked_fill(masked, -10000.0), dim=-1).masked_fill(masked, 0.0)
        attn = F.dropout(attn, self.p, self.training)
        return self.o_proj(torch.matmul(attn, v).transpose(1, 2).reshape(B, T, H * dk))


class ConvModule(nn.Module):
    """pointwise -> GLU -> causal depthwise (padded [K-1, 0]) -> LayerNorm -> SiLU -> pointwise."""

    def __init__(self, D, K, bias):
        super().__init__()
        self.K = K
        self.pointwise_conv1 = nn.Conv1d(D, 2 * D, 1, bias=bias)
        self.depthwise_conv = nn.Conv1d(D, D, K, groups=D, bias=bias)
        self.norm = nn.LayerNorm(D)
        self.pointwise_conv2 = nn.Conv1d(D, D, 1, bias=bias)

    def forward(self, x, valid):
        y = F.glu(self.pointwise_conv1(x.transpose(1, 2)), dim=1)
        y = y * valid[:, None, :].to(y.dtype)
        y = self.depthwise_conv(F.pad(y, (self.K - 1, 0)))
        y = F.silu(self.norm(y.transpose(1, 2)).transpose(1, 2))
        return self.pointwise_conv2(y).transpose(1, 2)


class Layer(nn.Module):
    def __init__(self, D, H, FF, K, ab, cb, p):
        super().__init__()
        self.feed_forward1, self.feed_forward2 = FeedForward(D, FF, ab, p), FeedForward(D, FF, ab, p)
        self.norm_feed_forward1, self.norm_feed_forward2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.self_attn = RelAttention(D, H, ab, p)
        self.norm_self_att = nn.LayerNorm(D)
        self.conv = ConvModule(D, K, cb)
        self.norm_conv = nn.LayerNorm(D)
        self.norm_out = nn.LayerNorm(D)
        self.p = p

    def forward(self, x, pe, visible, valid):
        drop = lambda y: F.dropout(y, self.p, self.training)  # noqa: E731
        x = x + 0.5 * drop(self.feed_forward1(self.norm_feed_forward1(x)))
        x = x + drop(self.self_attn(self.norm_self_att(x), pe, visible))
        x = x + drop(self.conv(self.norm_conv(x), valid))
        x = x + 0.5 * drop(self.feed_forward2(self.norm_feed_forward2(x)))
        return self.norm_out(x)


class Encoder(nn.Module):
    streaming = True  # train.py's encoder_forward calls forward() directly

    def __init__(self, mc):
        super().__init__()
        D = mc["d_model"]
        self.D, self.p, self.xscale = D, mc["dropout"], math.sqrt(D) if mc.get("scale_input") else 1.0
        self.subsampling = Subsampling(mc["mels"], mc["sub_channels"], D)
        self.layers = nn.ModuleList([Layer(D, mc["heads"], mc["ff"], mc["conv_kernel"], mc.get("attention_bias", False),
                                           mc.get("conv_bias", False), mc["dropout"]) for _ in range(mc["layers"])])
        self.menu = [list(x) for x in mc["menu"]]
        self.ctx = self.menu[0]

    def forward(self, feats, fmask, ctx=None):
        """feats [B, F, M], fmask [B, F] -> (hidden [B, T, D], T_b [B]) under the [L, R] pair ctx
        (default: the selected one, self.ctx)."""
        lens = fmask.sum(-1).long()
        h, lens = self.subsampling(feats * fmask[..., None].to(feats.dtype), lens)
        h = F.dropout(h * self.xscale, self.p, self.training)
        B, T, _ = h.shape
        valid = torch.arange(T, device=h.device)[None, :] < lens[:, None]
        visible = chunked_mask(T, ctx or self.ctx, h.device)[None] & valid[:, None, :]
        pe = rel_pos_emb(T, self.D, h.device, h.dtype)
        for layer in self.layers:
            h = layer(h, pe, visible, valid)
        return h, lens


class Decoder(nn.Module):
    def __init__(self, V1, P, layers):
        super().__init__()
        self.embedding = nn.Embedding(V1, P)
        self.lstm = nn.LSTM(P, P, num_layers=layers, batch_first=True)
        self.decoder_projector = nn.Linear(P, P)


class Joint(nn.Module):
    def __init__(self, P, V1):
        super().__init__()
        self.head = nn.Linear(P, V1)
        self.activation = nn.ReLU()


class Config:
    pass


class StreamingRNNT(nn.Module):
    """Encoder + RNN-T head with ParakeetForTDT's attribute layout (encoder, encoder_projector,
    decoder.{embedding, lstm, decoder_projector}, joint.{head, activation}, config.blank_token_id)."""

    def __init__(self, mc):
        super().__init__()
        V1, P = mc["vocab"] + 1, mc["pred_hidden"]
        self.encoder = Encoder(mc)
        self.encoder_projector = nn.Linear(mc["d_model"], P)
        self.decoder = Decoder(V1, P, mc["pred_layers"])
        self.joint = Joint(P, V1)
        self.config = Config()
        self.config.blank_token_id = mc["vocab"]
        self.config.pad_token_id = 1
        self.config.durations = []
        self.mc = mc


def build(mc):
    m = StreamingRNNT(mc)
    with torch.no_grad():
        lstm = m.decoder.lstm
        P = lstm.hidden_size
        for l_ in range(lstm.num_layers):
            getattr(lstm, f"bias_ih_l{l_}")[P:2 * P].fill_(1.0)
            getattr(lstm, f"bias_hh_l{l_}")[P:2 * P].zero_()
        m.decoder.embedding.weight[mc["vocab"]].zero_()
    return m


# ----------------------------------------------------------------------------------------------
# loss and decoding


def rnnt_loss(logits, targets, logit_lengths, target_lengths, blank):
    """Per-utterance RNN-T negative log-likelihood (Graves 2012): from (t, u) blank goes to (t + 1, u),
    label y[u] to (t, u + 1); the path ends with a blank from (T - 1, U).  logits [B, T, U+1, V1].
    One loop step per frame; the label chain inside a frame is solved with a cumulative log-sum-exp
    (alpha[t, u] = W[u] + logcumsumexp(alpha[t-1] + blank[t-1] - W)[u], W = prefix sums of the label
    log-probabilities at frame t).  Returns [B]."""
    B, T, U1, _ = logits.shape
    U = U1 - 1
    x = logits.float() if logits.dtype != torch.float64 else logits
    lse = torch.logsumexp(x, dim=-1)
    blank_lp = x[..., blank] - lse
    if U > 0:
        idx = targets[:, None, :U, None].long().expand(B, T, U, 1)
        lab_lp = x[:, :, :U, :].gather(-1, idx).squeeze(-1) - lse[:, :, :U]
    else:
        lab_lp = x.new_zeros(B, T, 0)
    W = torch.cat([x.new_zeros(B, T, 1), torch.cumsum(lab_lp, dim=2)], dim=2)  # [B, T, U1]
    A = x.new_full((B, U1), NEG)
    A[:, 0] = 0.0
    alphas = []
    for t in range(T):
        if t > 0:
            A = alphas[-1] + blank_lp[:, t - 1]
        Wt = W[:, t]
        A = Wt + torch.logcumsumexp(A - Wt, dim=1)
        alphas.append(A)
    alpha = torch.stack(alphas, dim=1)
    b = torch.arange(B, device=x.device)
    tl = logit_lengths.to(x.device).long() - 1
    ul = target_lengths.to(x.device).long()
    return -(alpha[b, tl, ul] + blank_lp[b, tl, ul])


def rnnt_nll_bruteforce(logits, target, T, U, blank):
    """-log P(y|x) by enumerating every RNN-T path (float64, tiny sizes)."""
    lp = torch.log_softmax(logits.double(), dim=-1)
    tot = []

    def walk(t, u, acc):
        if t == T - 1 and u == U:
            tot.append(acc + float(lp[t, u, blank]))
        if t < T - 1:
            walk(t + 1, u, acc + float(lp[t, u, blank]))
        if u < U:
            walk(t, u + 1, acc + float(lp[t, u, target[u]]))

    walk(0, 0, 0.0)
    return -float(torch.logsumexp(torch.tensor(tot, dtype=torch.float64), 0))


def heads(tdt, model):
    """tdt.Heads for tdt.greedy_tdt as an RNN-T decoder: one duration, 0, so a blank advances one
    frame and a label stays (with the per-frame symbol cap) -- spec 6.4's RNN-T case."""
    h = tdt.Heads(model.decoder.embedding, model.decoder.lstm, model.decoder.decoder_projector, model.joint.head,
                  model.joint.activation, model.config.blank_token_id, [0])
    head = model.joint.head

    def joint(f, q):
        y = head(torch.relu(f + q))
        return torch.cat([y, y.new_zeros(y.shape[:-1] + (1,))], dim=-1)

    h.joint = joint
    return h


# ----------------------------------------------------------------------------------------------
# GGUF (the offline model to start from) and the vocabulary


def read_gguf(path):
    """{key: value}, {name: float32 tensor} of a GGUF file with f32/f16 tensors."""
    import numpy as np

    with open(path, "rb") as f:
        b = f.read()
    p = 0

    def rd(fmt):
        nonlocal p
        v = struct.unpack_from(fmt, b, p)[0]
        p += struct.calcsize(fmt)
        return v

    def rs():
        nonlocal p
        n = rd("<Q")
        s = b[p:p + n].decode("utf-8")
        p += n
        return s

    scal = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def rv(t):
        if t in scal:
            return rd(scal[t])
        if t == 8:
            return rs()
        if t == 9:
            at, n = rd("<I"), rd("<Q")
            return [rv(at) for _ in range(n)]
        raise ValueError(f"{path}: GGUF value type {t}")

    if b[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    p = 4
    rd("<I")
    nt, nk = rd("<Q"), rd("<Q")
    kv = {}
    for _ in range(nk):
        k = rs()
        kv[k] = rv(rd("<I"))
    infos = []
    for _ in range(nt):
        n = rs()
        dims = [rd("<Q") for _ in range(rd("<I"))]
        infos.append((n, dims[::-1], rd("<I"), rd("<Q")))
    al = kv.get("general.alignment", 32)
    base = (p + al - 1) // al * al
    out = {}
    for n, shape, t, off in infos:
        if t not in (GGUF_F32, GGUF_F16):
            raise ValueError(f"{path}: tensor {n} has GGUF type {t}; only f32/f16 files can initialise a model")
        dt = np.float32 if t == GGUF_F32 else np.float16
        cnt = int(np.prod(shape))
        a = np.frombuffer(b, dtype=dt, count=cnt, offset=base + off).astype(np.float32).reshape(shape)
        out[n] = torch.from_numpy(a.copy())
    return kv, out


def spm_from_gguf(kv):
    """A SentencePiece BPE model with the GGUF's pieces at the same ids (score -id: merges in id
    order), so targets use exactly the vocabulary of the model we start from."""
    pieces = kv["tokenizer.ggml.tokens"]
    types = kv["tokenizer.ggml.token_type"]
    unk = types.index(fxlib.PIECE_UNKNOWN)
    ps = [(p, 0.0 if t != fxlib.PIECE_NORMAL else -float(i), t) for i, (p, t) in enumerate(zip(pieces, types))]
    pad = next((i for i, (p, t) in enumerate(zip(pieces, types)) if p == "<pad>" and t == fxlib.PIECE_CONTROL), -1)
    return fxlib.build_spm_model(ps, unk_id=unk, pad_id=pad)


def from_canonical(g, kv):
    """A vkasr GGUF's tensors in PyTorch shapes and orders: 2-D conv kernels back to 3-D/4-D, the
    subsampling linear's columns from the engine's f*C + c back to c*F + f."""
    C = int(kv["parakeet.subsampling_channels"])
    out = {}
    for n, w in g.items():
        if n.endswith(("subsampling.layers.0.weight", "subsampling.layers.2.weight", "subsampling.layers.5.weight")):
            w = w.view(w.shape[0], 1, 3, 3)
        elif n.endswith(("subsampling.layers.3.weight", "subsampling.layers.6.weight")):
            w = w.view(w.shape[0], w.shape[1], 1, 1)
        elif n == "encoder.subsampling.linear.weight":
            w = w.view(w.shape[0], -1, C).transpose(1, 2).reshape(w.shape[0], -1)
        elif n.endswith("conv.depthwise_conv.weight"):
            w = w.view(w.shape[0], 1, -1)
        elif n.endswith(("pointwise_conv1.weight", "pointwise_conv2.weight")):
            w = w.view(w.shape[0], w.shape[1], 1)
        out[n] = w
    return out


def init_from_gguf(model, path, log=print):
    """Starts the streaming model from a vkasr GGUF (f32/f16) of the same depth: train.py's offline
    ParakeetForTDT export or a streaming model.  Conv kernels and the subsampling linear go back to
    PyTorch's layout, the LSTM's single bias goes into bias_ih, a TDT joint gives its token rows (the
    duration rows dropped).  From the offline model: its 16 subsampled frequency bins go onto causal
    bins 1..16 (the causal stages shift each bin by about one; bin 0 starts at zero), the depthwise
    conv keeps the folded BatchNorm scale, the folded shift is dropped and the conv module's LayerNorm
    starts at 1 / 0.  From a wider model of the same depth: shrink_state.  Returns the names left at
    their initial values."""
    kv, g = read_gguf(path)
    g = from_canonical(g, kv)
    sd = model.state_dict()
    if int(kv["parakeet.d_model"]) != model.mc["d_model"]:
        if int(kv["parakeet.n_layers"]) != model.mc["layers"]:
            raise ValueError(f"{path}: {kv['parakeet.n_layers']} layers; the model has {model.mc['layers']}")
        g = shrink_state(g, model.mc)
        log(f"init: widths of {os.path.basename(path)} shrunk to d_model {model.mc['d_model']}, feed-forward "
            f"{model.mc['ff']}, subsampling channels {model.mc['sub_channels']} (the largest-norm units kept)")
    done = set()
    V1 = model.config.blank_token_id + 1
    C = model.mc["sub_channels"]
    with torch.no_grad():
        for name, dst in sd.items():
            src = name
            if name.endswith(("lstm.bias_ih_l0", "lstm.bias_hh_l0")):
                src = name[:-len("bias_ih_l0")] + "bias_l0"
            if src not in g:
                continue
            w = g[src]
            if name.endswith("lstm.bias_hh_l0"):
                w = torch.zeros_like(w)
            if name in ("joint.head.weight", "joint.head.bias"):
                w = w[:V1]
            if name == "encoder.subsampling.linear.weight" and w.numel() != dst.numel():
                Dm = w.shape[0]
                f_old, f_new = w.shape[1] // C, dst.shape[1] // C
                new = torch.zeros(Dm, C, f_new)
                new[:, :, f_new - f_old:] = w.view(Dm, C, f_old)
                w = new.view(Dm, C * f_new)
            if w.numel() != dst.numel():
                raise ValueError(f"{path}: {src} has {tuple(w.shape)}, the streaming model {tuple(dst.shape)}")
            dst.copy_(w.reshape(dst.shape))
            done.add(name)
    left = sorted(set(sd) - done)
    log(f"init: {len(done)} tensors from {os.path.basename(path)} ({kv.get('general.name', '?')}); left at their "
        f"initial values: {len(left)} ({', '.join(sorted({n.split('.', 3)[-1] for n in left}))})")
    return left


def _top(score, n):
    return torch.sort(torch.argsort(score, descending=True)[:n]).values


def shrink_state(sd, mc):
    """A state dict of the same structure but smaller widths (d_model, feed-forward, subsampling
    channels; heads unchanged, so a smaller head size): for each width the units with the largest
    weight norms are kept (residual dimensions by the summed |weight| of the LayerNorms on the
    residual stream; attention, feed-forward, conv-module and subsampling units by the product of the
    norms of the weights into and out of them).  A starting point for fine-tuning a model that must
    be smaller, not a model by itself."""
    D, FF, C, H = mc["d_model"], mc["ff"], mc["sub_channels"], mc["heads"]
    out = dict(sd)
    Ds = sd["encoder.subsampling.linear.weight"].shape[0]
    nl = mc["layers"]
    res_norms = ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out")
    imp = sum(sd[f"encoder.layers.{l_}.{n}.weight"].abs() for l_ in range(nl) for n in res_norms)
    r = _top(imp, D)
    rn = lambda w, dim: w.norm(dim=dim)  # noqa: E731
    # subsampling: three channel sets (conv0 + dw2, pw3 + dw5, pw6 + the linear's channel groups)
    g = {k[len("encoder.subsampling."):]: v for k, v in sd.items() if k.startswith("encoder.subsampling.")}
    Cs = g["layers.0.weight"].shape[0]
    Fq = g["linear.weight"].shape[1] // Cs
    lin = g["linear.weight"].view(Ds, Cs, Fq)
    s1 = _top(rn(g["layers.0.weight"].flatten(1), 1) * rn(g["layers.3.weight"].flatten(1), 0), C)
    s2 = _top(rn(g["layers.3.weight"].flatten(1), 1) * rn(g["layers.6.weight"].flatten(1), 0), C)
    s3 = _top(rn(g["layers.6.weight"].flatten(1), 1) * lin.norm(dim=(0, 2)), C)
    P = "encoder.subsampling."
    out[P + "layers.0.weight"], out[P + "layers.0.bias"] = g["layers.0.weight"][s1], g["layers.0.bias"][s1]
    out[P + "layers.2.weight"], out[P + "layers.2.bias"] = g["layers.2.weight"][s1], g["layers.2.bias"][s1]
    out[P + "layers.3.weight"], out[P + "layers.3.bias"] = g["layers.3.weight"][s2][:, s1], g["layers.3.bias"][s2]
    out[P + "layers.5.weight"], out[P + "layers.5.bias"] = g["layers.5.weight"][s2], g["layers.5.bias"][s2]
    out[P + "layers.6.weight"], out[P + "layers.6.bias"] = g["layers.6.weight"][s3][:, s2], g["layers.6.bias"][s3]
    out[P + "linear.weight"] = lin[r][:, s3].reshape(D, C * Fq)
    out[P + "linear.bias"] = g["linear.bias"][r]
    for l_ in range(nl):
        p = f"encoder.layers.{l_}."
        for n in res_norms:
            out[p + n + ".weight"], out[p + n + ".bias"] = sd[p + n + ".weight"][r], sd[p + n + ".bias"][r]
        for ff in ("feed_forward1", "feed_forward2"):
            w1, w2 = sd[p + ff + ".linear1.weight"], sd[p + ff + ".linear2.weight"]
            f = _top(rn(w1, 1) * rn(w2, 0), FF)
            out[p + ff + ".linear1.weight"], out[p + ff + ".linear2.weight"] = w1[f][:, r], w2[r][:, f]
        a = p + "self_attn."
        dk0, dk = Ds // H, D // H
        q, k, v, o = (sd[a + x + "_proj.weight"] for x in "qkvo")
        sc = (rn(q, 1) * rn(k, 1) + rn(v, 1) * rn(o, 0)).view(H, dk0)
        inner = torch.cat([h * dk0 + _top(sc[h], dk) for h in range(H)])
        for x in "qkv":
            out[a + x + "_proj.weight"] = sd[a + x + "_proj.weight"][inner][:, r]
        out[a + "o_proj.weight"] = o[r][:, inner]
        out[a + "relative_k_proj.weight"] = sd[a + "relative_k_proj.weight"][inner][:, r]
        for x in ("bias_u", "bias_v"):
            out[a + x] = sd[a + x].reshape(-1)[inner].view(H, dk)
        c = p + "conv."
        pw1, pw2 = sd[c + "pointwise_conv1.weight"], sd[c + "pointwise_conv2.weight"]
        ch = _top(rn(pw1[:Ds].flatten(1), 1) * rn(pw2.flatten(1), 0) * sd[c + "norm.weight"].abs(), D)
        out[c + "pointwise_conv1.weight"] = torch.cat([pw1[ch], pw1[Ds + ch]])[:, r]
        out[c + "depthwise_conv.weight"] = sd[c + "depthwise_conv.weight"][ch]
        out[c + "norm.weight"], out[c + "norm.bias"] = sd[c + "norm.weight"][ch], sd[c + "norm.bias"][ch]
        out[c + "pointwise_conv2.weight"] = pw2[r][:, ch]
    out["encoder_projector.weight"] = sd["encoder_projector.weight"][:, r]
    return out


# ----------------------------------------------------------------------------------------------
# export (transformers' NemotronAsrStreaming layout, as tools/fixtures/make_streaming_fixtures.py)

def write_safetensors(path, tensors):
    fxlib.write_safetensors_f32(path, tensors)


def read_safetensors(path):
    import numpy as np

    with open(path, "rb") as f:
        b = f.read()
    n = int.from_bytes(b[:8], "little")
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        dt = {"F32": np.float32, "F16": np.float16}[v["dtype"]]
        out[k] = torch.from_numpy(np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt).astype(np.float32).reshape(
            v["shape"]).copy())
    return out


def hf_names(sd):
    return fxlib.rename_prefixes(sd, fxlib.HF_STREAMING_SUB)


def from_hf_names(sd):
    return fxlib.rename_prefixes(sd, {b: a for a, b in fxlib.HF_STREAMING_SUB.items()})


def export_hf(model, d, pieces, preemph=None):
    """config.json (model_type nemotron_asr_streaming; sliding_window = L + 1, the lookahead menu),
    processor_config.json (normalize NA is implied by the model type; no pre-emphasis),
    model.safetensors (f32) and a tokenizer.json holding the SentencePiece piece table."""
    mc = model.mc
    V = mc["vocab"]
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), hf_names(model.state_dict()))
    menu = mc["menu"]
    enc = {"hidden_size": mc["d_model"], "num_hidden_layers": mc["layers"], "num_attention_heads": mc["heads"],
           "intermediate_size": mc["ff"], "hidden_act": "silu", "attention_bias": bool(mc.get("attention_bias")),
           "convolution_bias": bool(mc.get("conv_bias")), "conv_kernel_size": mc["conv_kernel"],
           "subsampling_factor": 8, "subsampling_conv_channels": mc["sub_channels"], "num_mel_bins": mc["mels"],
           "subsampling_conv_kernel_size": 3, "subsampling_conv_stride": 2, "scale_input": bool(mc.get("scale_input")),
           "sliding_window": menu[0][0] + 1, "supported_num_lookahead_tokens": [r for _, r in menu],
           "default_num_lookahead_tokens": menu[0][1]}
    cfg = {"architectures": ["NemotronAsrStreamingForRNNT"], "model_type": "nemotron_asr_streaming",
           "vocab_size": V + 1, "blank_token_id": V, "pad_token_id": 1, "decoder_hidden_size": mc["pred_hidden"],
           "num_decoder_layers": mc["pred_layers"], "hidden_act": "relu", "max_symbols_per_step": 10,
           "encoder_config": enc}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    fe = {"feature_extractor": {"feature_extractor_type": "NemotronAsrStreamingFeatureExtractor",
                                "feature_size": mc["mels"], "sampling_rate": 16000, "hop_length": 160,
                                "win_length": 400, "n_fft": 512, "preemphasis": preemph, "padding_value": 0.0},
          "processor_class": "NemotronAsrStreamingProcessor"}
    with open(os.path.join(d, "processor_config.json"), "w") as f:
        json.dump(fe, f, indent=1)
    special = {p: i for i, p in enumerate(pieces) if p in ("<unk>", "<pad>")}
    tok = {"version": "1.0", "model": {"type": "BPE", "vocab": {p: i for i, p in enumerate(pieces)}, "merges": [],
                                       "unk_token": "<unk>", "byte_fallback": False},
           "added_tokens": [{"id": i, "content": p, "special": True} for p, i in special.items()]
           + [{"id": V, "content": "<blank>", "special": True}]}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    return sorted(os.listdir(d))


def load_hf(d, dropout=0.0):
    """A StreamingRNNT from an export_hf directory (or the committed fixture of the same layout)."""
    cfg = json.load(open(os.path.join(d, "config.json")))
    e = cfg["encoder_config"]
    L = e["sliding_window"] - 1
    menu = [[L, e["default_num_lookahead_tokens"]]] + [[L, r] for r in e["supported_num_lookahead_tokens"]
                                                          if r != e["default_num_lookahead_tokens"]]
    mc = {"d_model": e["hidden_size"], "layers": e["num_hidden_layers"], "heads": e["num_attention_heads"],
          "ff": e["intermediate_size"], "conv_kernel": e["conv_kernel_size"], "sub_channels": e["subsampling_conv_channels"],
          "mels": e["num_mel_bins"], "pred_hidden": cfg["decoder_hidden_size"], "pred_layers": cfg["num_decoder_layers"],
          "dropout": dropout, "vocab": cfg["vocab_size"] - 1, "menu": menu,
          "attention_bias": e.get("attention_bias", True), "conv_bias": e.get("convolution_bias", True),
          "scale_input": e.get("scale_input", True)}
    m = StreamingRNNT(mc)
    m.load_state_dict(from_hf_names(read_safetensors(os.path.join(d, "model.safetensors"))), strict=True)
    return m.eval()


# ----------------------------------------------------------------------------------------------
# self-tests


def selftest_loss(log=print):
    g = torch.Generator().manual_seed(3)
    worst = 0.0
    for T, U in ((1, 0), (3, 2), (4, 3), (5, 1)):
        V1 = 5
        logits = torch.randn(2, T + 1, U + 2, V1, generator=g, dtype=torch.float64)
        tgt = torch.randint(0, V1 - 1, (2, U + 1), generator=g)
        got = rnnt_loss(logits, tgt, torch.tensor([T, T + 1]), torch.tensor([U, U + 1]), V1 - 1)
        for b, (tb, ub) in enumerate(((T, U), (T + 1, U + 1))):
            ref = rnnt_nll_bruteforce(logits[b], tgt[b].tolist(), tb, ub, V1 - 1)
            worst = max(worst, abs(float(got[b]) - ref))
    if worst > 1e-9:
        raise RuntimeError(f"rnnt_loss differs from path enumeration by {worst:.2e}")
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64, requires_grad=True)
    tg = torch.tensor([[1, 2], [3, 0]])
    ok = torch.autograd.gradcheck(lambda z: rnnt_loss(z, tg, torch.tensor([4, 3]), torch.tensor([2, 1]), 4).sum(),
                                  (x,), eps=1e-6, atol=1e-6)
    log(f"rnnt loss: == path enumeration (max diff {worst:.1e}), gradcheck {'ok' if ok else 'FAILED'}")


def selftest_reference(root, log=print):
    """The encoder against the committed float64 reference of NeMo's arithmetic
    (tests/data/streaming: tools/fixtures/make_streaming_fixtures.py, every pair of its menu), alone and
    inside a padded batch."""
    import numpy as np

    base = os.path.join(root, "tests", "data", "streaming")
    m = load_hf(os.path.join(base, "stream_rnnt_hf")).double()
    worst, worst_b, n = 0.0, 0.0, 0
    for lr in m.mc["menu"]:
        ms = (lr[1] + 1) * 80
        mels, wants = [], []
        for clip in sorted(os.listdir(os.path.join(base, f"expected_{ms}"))):
            d = os.path.join(base, f"expected_{ms}", clip)
            mels.append(torch.from_numpy(np.load(os.path.join(d, "mel.npy")).astype(np.float64)))
            wants.append(torch.from_numpy(np.load(os.path.join(d, "encoder.npy")).astype(np.float64)))
        Fm = max(x.shape[0] for x in mels) + 13
        feats = torch.zeros(len(mels), Fm, mels[0].shape[1], dtype=torch.float64)
        fmask = torch.zeros(len(mels), Fm, dtype=torch.bool)
        for k, x in enumerate(mels):
            feats[k, :x.shape[0]] = x
            fmask[k, :x.shape[0]] = True
        with torch.no_grad():
            hb, Tb = m.encoder(feats, fmask, lr)
            for k, (x, want) in enumerate(zip(mels, wants)):
                h1, T1 = m.encoder(x[None], torch.ones(1, x.shape[0], dtype=torch.bool), lr)
                if int(T1[0]) != want.shape[0] or int(Tb[k]) != want.shape[0]:
                    raise RuntimeError(f"encoder frames {int(T1[0])} / batched {int(Tb[k])}, reference {want.shape[0]}")
                worst = max(worst, float((h1[0] - want).norm() / want.norm()))
                worst_b = max(worst_b, float((hb[k, :want.shape[0]] - want).norm() / want.norm()))
                n += 1
    if worst > 1e-6 or worst_b > 1e-6:  # the reference is stored in float32
        raise RuntimeError(f"encoder differs from the NeMo reference: alone {worst:.2e}, batched {worst_b:.2e}")
    log(f"streaming encoder: == the float64 NeMo-arithmetic reference on {n} clip/lookahead pairs (relative error "
        f"alone {worst:.1e}, in a padded batch {worst_b:.1e})")


if __name__ == "__main__":
    import sys

    selftest_loss()
    selftest_reference(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
