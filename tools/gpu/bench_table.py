#!/usr/bin/env python3
"""bench_table.py OUT "ENGINE|PRECISION|FILE" ... — the Markdown table of `vkasr bench --json` reports in OUT
(each FILE one engine's, missing ones skipped) next to PyTorch's encoder (OUT/pytorch/bench_pytorch.json,
tools/fixtures/bench_pytorch.py) with the ratios; used by bench.sh and quick.sh."""
import json
import os
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]

    def load(name):
        try:
            return json.load(open(os.path.join(out, name)))
        except (OSError, ValueError):
            return None

    pt = (load("pytorch/bench_pytorch.json") or {}).get("encoder", {})

    def pt_ms(label, secs):
        r = pt.get(f"{label} {'60s' if secs == 60 else '10min'}")
        return r["median_ms"] if r else None

    print("| engine | precision | audio | encoder ms | decoder ms | wall ms | RTFx | peak MiB | first run ms "
          "| encoder / PyTorch bf16 | / fp32 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in sys.argv[2:]:
        eng, prec, name = spec.split("|", 2)
        for L in (load(name) or {}).get("lengths", []):
            s, e = L["seconds"], L["encoder_ms"]["median"]
            bf, fp = pt_ms("bf16", s), pt_ms("fp32", s)
            f = lambda k: f"{L[k]['median']:.1f} ({L[k]['min']:.1f}-{L[k]['max']:.1f})"
            print(f"| {eng} | {prec} | {s:g} s | {f('encoder_ms')} | {f('decoder_ms')} | {f('wall_ms')} | "
                  f"{L['rtfx']['median']:.0f} | {L['peak_device_mib']:.0f} | {L['first_ms']:.0f} | "
                  f"{e / bf if bf else float('nan'):.2f} | {e / fp if fp else float('nan'):.2f} |")
    for label in ("bf16", "fp32", "fp32+tf32"):
        print(f"PyTorch {label}: encoder 60 s {pt_ms(label, 60)} ms, 10 min {pt_ms(label, 600)} ms")


if __name__ == "__main__":
    main()
