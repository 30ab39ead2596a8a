#!/usr/bin/env python3
"""headline_table.py OUT — the Markdown table that opens docs/gpu-results.md, from headline.sh's files in OUT:
vkasr on Vulkan, vkasr's CUDA backend and PyTorch bf16 per figure, each target and by how much it is met or
missed, then the per-op profiles at 10 minutes. Missing files leave their cells empty."""
import json
import os
import re
import sys


def load_json(out, name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return {}


def text(out, name):
    try:
        return open(os.path.join(out, name), errors="replace").read()
    except OSError:
        return ""


def bench(out, name):
    """{seconds: {encoder, decoder, wall, peak, tokens, encoder_range}} from a `vkasr bench --json` report"""
    r = {}
    for L in load_json(out, name).get("lengths", []):
        r[L["seconds"]] = {k: L[k + "_ms"]["median"] for k in ("encoder", "decoder", "wall")}
        r[L["seconds"]]["peak"] = L.get("peak_device_mib")
        r[L["seconds"]]["tokens"] = L.get("tokens")
        r[L["seconds"]]["encoder_range"] = (L["encoder_ms"].get("min"), L["encoder_ms"].get("max"))
    return r


def decoder_iterations(out, name, frames):
    """the device decoder's iterations (queued) for an input of `frames` encoder frames, from a `vkasr
    bench -v` log (every run of that length decodes the same transcript: the first line found)"""
    for line in text(out, name).splitlines():
        m = re.search(r"device decoder: 1 hypotheses, (\d+) frames, (\d+) tokens, .* \((\d+) queued\)", line)
        if m and int(m.group(1)) == frames:
            return int(m.group(3))
    return None


def profile(out, name):
    """the last profile block of a --profile log: {op: ms}"""
    blocks, cur = [], {}
    for line in text(out, name).splitlines():
        m = re.match(r"vkasr: profile (\S.*?)\s+(\d+) calls\s+([\d.]+) ms", line)
        if m:
            cur[m.group(1)] = (int(m.group(2)), float(m.group(3)))
            if m.group(1) == "(all ops)":
                blocks.append(cur)
                cur = {}
    return blocks[-1] if blocks else {}


def fmt(v, unit=""):
    return "" if v is None else f"{v:.1f}{unit}"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    vk, cu = bench(out, "vulkan.json"), bench(out, "cuda.json")
    pt = load_json(out, "pytorch/bench_pytorch.json").get("encoder", {})
    pt_ms = lambda key: (pt.get(key) or {}).get("median_ms")
    # PyTorch's encoder by module at 10 min (bench_pytorch.py --breakdown): its attention core per layer
    ptbd = load_json(out, "pytorch/bench_pytorch_breakdown.json").get("breakdown", {}).get("10min", {})
    pt_att = (ptbd.get("parts_ms", {}).get("attention core") / ptbd["layers"]
              if ptbd.get("layers") and "attention core" in ptbd.get("parts_ms", {}) else None)
    att = {}
    for line in text(out, "attention.txt").splitlines():
        m = re.search(r"cfg=(\S+) ms=([\d.]+) tflops=([\d.]+)", line)
        if m:
            att[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    gemm = re.search(r"cfg=(\S+) .*ms=([\d.]+) tflops=([\d.]+)", text(out, "gemm.txt"))
    rtfx = {}
    for b in (256, "256r2", "256r3", 64, "256s1"):
        m = re.search(r"RTFx ([\d.]+) after it", text(out, f"batch{b}.log"))
        rtfx[b] = float(m.group(1)) if m else None
    # batch 256 with two sessions: the median of the runs there are (headline.sh makes three) and their range
    runs256 = sorted(v for v in (rtfx[256], rtfx["256r2"], rtfx["256r3"]) if v is not None)
    med256 = runs256[len(runs256) // 2] if runs256 else None
    runs_note = (f"{len(runs256)} runs: {runs256[0]:.1f}-{runs256[-1]:.1f}" if len(runs256) > 1
                 else f"{len(runs256)} run")
    ptb = load_json(out, "pytorch-batch/batch_pytorch.json").get("sizes", {}).get("256", {})
    pv, pc = profile(out, "profile-vulkan.log"), profile(out, "profile-cuda.log")
    layers = 24
    # every attention kernel's profile name starts so (relpos_attention, _tc, _gemm, ...)
    att_layer = lambda p: (sum(ms for op, (_, ms) in p.items() if op.startswith("relpos_attention")) / layers
                           if any(op.startswith("relpos_attention") for op in p) else None)
    best_att = min(att.items(), key=lambda kv: kv[1][0]) if att else None

    def g(d, s, k):
        return (d.get(s) or {}).get(k)

    # the decoder's work follows the transcript: the random model's tokens (which any change of
    # rounding upstream can move) go with its times, and the decoder's time per iteration with it
    # (60 s: 750 encoder frames, 100 mel frames a second subsampled 8x)
    iters = {"vk": decoder_iterations(out, "vulkan.log", 750), "cu": decoder_iterations(out, "cuda.log", 750)}

    def with_tokens(d, s, k):
        v, n = g(d, s, k), g(d, s, "tokens")
        note = f"{n} tokens" if v is not None and n is not None else ""
        it = iters["vk" if d is vk else "cu"] if k == "decoder" and s == 60 else None
        if note and it:
            note += f", {it} iterations queued: {1000.0 * v / it:.1f} us each"
        return fmt(v) + (f" ({note})" if note else "")

    def with_range(d, s, k):
        v, (lo, hi) = g(d, s, k), g(d, s, k + "_range") or (None, None)
        return fmt(v) + (f" ({lo:.1f}-{hi:.1f})" if v is not None and lo is not None and hi is not None else "")

    def verdict(v, target, lower_is_better=True):
        if v is None:
            return "not measured"
        ok = v <= target if lower_is_better else v >= target
        ratio = v / target if lower_is_better else target / v
        return "met" if ok else f"missed ({ratio:.2f}x)"

    enc10, pt10 = g(vk, 600, "encoder"), pt_ms("bf16 10min")
    rows = [
        ("encoder, 10 min (ms; median of 5, range)", with_range(vk, 600, "encoder"), with_range(cu, 600, "encoder"),
         fmt(pt10), "<= 200 and below PyTorch",
         verdict(enc10, min(200.0, pt10 or 200.0))),
        ("encoder, 60 s (ms)", fmt(g(vk, 60, "encoder")), fmt(g(cu, 60, "encoder")), fmt(pt_ms("bf16 60s")), "", ""),
        ("decoder, 60 s (ms)", with_tokens(vk, 60, "decoder"), with_tokens(cu, 60, "decoder"), "", "CUDA <= 30",
         verdict(g(cu, 60, "decoder"), 30.0)),
        ("end to end, 60 s (ms)", with_tokens(vk, 60, "wall"), with_tokens(cu, 60, "wall"), "", "<= 45",
         verdict(g(vk, 60, "wall"), 45.0)),
        ("end to end, 10 min (ms)", fmt(g(vk, 600, "wall")), fmt(g(cu, 600, "wall")), "", "", ""),
        ("peak device memory, 60 s / 10 min (MiB)", f"{fmt(g(vk, 60, 'peak'))} / {fmt(g(vk, 600, 'peak'))}",
         f"{fmt(g(cu, 60, 'peak'))} / {fmt(g(cu, 600, 'peak'))}", "", "", ""),
        ("attention per layer, T = 7500, 8x128 (ms; profile of the 10 min run / 24; PyTorch: its attention "
         "modules less their projections, CUDA events)", fmt(att_layer(pv)), fmt(att_layer(pc)), fmt(pt_att), "<= 3",
         verdict(att_layer(pv), 3.0)),
        ("attention kernel alone, T = 7500 (ms, TFLOP/s as 4 T^2 D)",
         f"{best_att[1][0]:.2f}, {best_att[1][1]:.1f} ({best_att[0]})" if best_att else "", "", "", "<= 3",
         verdict(best_att[1][0] if best_att else None, 3.0)),
        ("GEMM 7500 x 4096 x 1024, f16 (TFLOP/s)", f"{float(gemm.group(3)):.1f} ({gemm.group(1)})" if gemm else "", "",
         "", ">= 200", verdict(float(gemm.group(3)) if gemm else None, 200.0, False)),
        ("packed batches, 1000 inputs of 2-20 s, RTFx (batch 256, two sessions, median of the runs; vkasr after model load, PyTorch end to end / encoder only)",
         f"{fmt(med256)} ({runs_note}; 64: {fmt(rtfx[64])}; 256, one session: {fmt(rtfx['256s1'])})", "",
         f"{fmt(ptb.get('e2e_rtfx'))} / {fmt(ptb.get('encoder_rtfx'))}", ">= 5000", verdict(med256, 5000.0, False)),
    ]
    print(f"GPU: {text(out, 'gpu.txt').strip()}\n")
    print("| | vkasr Vulkan | vkasr CUDA | PyTorch bf16 | target | met? |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    for name, p in (("Vulkan", pv), ("CUDA", pc)):
        if not p:
            continue
        total = p.get("(all ops)", (0, 0.0))[1]
        print(f"\nPer-op GPU time at 10 min, {name} (second file of the process; ms, share of all ops):\n")
        print("| op | calls | ms | share |")
        print("| --- | --- | --- | --- |")
        for op, (calls, ms) in sorted(p.items(), key=lambda kv: -kv[1][1]):
            if op != "(all ops)" and ms >= 0.01 * total:
                print(f"| {op} | {calls} | {ms:.1f} | {100 * ms / total:.0f} % |")
        print(f"| (all ops) | | {total:.1f} | |")
    if ptbd.get("parts_ms"):
        n = ptbd["layers"]
        print(f"\nPyTorch bf16 at 10 min by module (bench_pytorch.py --breakdown: CUDA events, one call of "
              f"{ptbd['timed_call_ms']:.1f} ms; ms summed over the {n} layers):\n")
        print("| part | ms | per layer |")
        print("| --- | --- | --- |")
        for part, ms in ptbd["parts_ms"].items():  # in bench_pytorch.py's PARTS order
            print(f"| {part} | {ms:.1f} | {ms / n:.2f} |")


if __name__ == "__main__":
    main()
