#!/usr/bin/env python3
"""compare_table.py REPORT.json... — Markdown tables of `vkasr compare --json` reports for docs/:
a summary with one row per report (the relative L2 error of each stage group: worst layer, worst
decoder step; tokens, transcript, verdict), then each report's per-stage table. Standard library only."""
import json, os, sys


def fmt(v):
    return "-" if v is None else f"{v:.2e}"


def summary_row(name, rep, cmp):
    st = cmp["stages"]
    by = {s["label"]: s for s in st}
    layers = [s for s in st if s["stage"] == "layer"]
    worst = max(layers, key=lambda s: s["rel_l2"] if s["rel_l2"] is not None else float("inf"))
    lg, tok, tr = by["logits"], by["tokens"], by["transcript"]
    forced = ", forced" if lg["teacher_forced"] else ""
    return (f"| {name} | {rep['precision']} | {cmp['device']} vs {rep['baseline']['device']} | "
            f"{fmt(by['mel']['rel_l2'])} | {fmt(by['subsampling']['rel_l2'])} | "
            f"{fmt(worst['rel_l2'])} ({worst['label']}) | {fmt(by['encoder']['rel_l2'])} | "
            f"{fmt(lg['rel_l2'])} ({lg['compared_steps']} steps{forced}) | "
            f"{tok['count']}/{tok['baseline_count']} {'equal' if tok['equal'] else 'differ'} | "
            f"{'equal' if tr['equal'] else 'differ'} | {'ok' if cmp['ok'] else 'FAIL at ' + cmp['failed_stage']} |")


def main():
    reports = []
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                reports.append((os.path.basename(path).removesuffix(".json"), json.load(f)))
        except (OSError, ValueError) as e:
            print(f"<!-- {path}: no report ({e}) -->")
    print("| run | precision | devices | mel | subsampling | worst layer | encoder | logits, worst step | tokens |"
          " transcript | result |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, rep in reports:
        for cmp in rep["comparisons"]:
            print(summary_row(name, rep, cmp))
    print("\nRelative L2 error ||b - a|| / ||a|| (a: the baseline); logits: the worst decoder step.")
    for name, rep in reports:
        for cmp in rep["comparisons"]:
            print(f"\n### {name}: {cmp['device']} ({cmp['name']}) against {rep['baseline']['device']} "
                  f"({rep['baseline']['name']}), {rep['precision']}, {rep['duration']:.0f} s\n")
            print("| stage | rows x cols | max-abs | rel L2 | tolerance | result |")
            print("| --- | --- | --- | --- | --- | --- |")
            for s in cmp["stages"]:
                if s["stage"] in ("tokens", "transcript"):
                    continue
                print(f"| {s['label']} | {s['rows']} x {s['cols']} | {fmt(s['max_abs'])} | {fmt(s['rel_l2'])} | "
                      f"{fmt(s['tolerance'])} | {'ok' if s['ok'] else 'FAIL'} |")


if __name__ == "__main__":
    main()
