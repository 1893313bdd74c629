#!/usr/bin/env python3
"""Ratios dlgraph / reference from a bench_cnn, bench_train or bench_gemm JSON run.

    ./bench_cnn --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
        --benchmark_format=json > cnn.json
    python3 bench/ratios.py cnn.json

Pairs BM_<what>_dlgraph/<args> with BM_<what>_libtorch/<args> (or
BM_<what>_openblas/<args>: bench_gemm's BM_train_*), repetition by repetition (random interleaving alternates them), and prints each side's
median time, the median of the per-repetition ratios and their range, and
the ratio of the two sides' fastest repetitions ("best"): on a shared
machine whose other tenants slow a core down for seconds at a time, the
fastest repetition of each is the one least disturbed.
"""
import json
import statistics
import sys
from collections import defaultdict


def main(path):
    runs = json.load(open(path))["benchmarks"]
    times = defaultdict(list)  # (what, args, side) -> [real_time per repetition]
    labels, gflops = {}, defaultdict(list)
    for r in runs:
        if r.get("run_type") != "iteration":
            continue
        name = r["run_name"] if "run_name" in r else r["name"]
        head, _, args = name.partition("/")
        args = args.replace("/real_time", "")
        for side in ("dlgraph", "libtorch", "openblas"):
            if head.endswith("_" + side):
                what = head[len("BM_"):-len(side) - 1]
                side = "reference" if side != "dlgraph" else side
                times[(what, args, side)].append(r["real_time"])
                if r.get("label"):
                    labels[(what, args)] = r["label"]
                if "GFLOP/s" in r:
                    gflops[(what, args, side)].append(r["GFLOP/s"])
    unit = runs[0].get("time_unit", "us") if runs else "us"
    print(f"{'benchmark':44} {'dlgraph':>10} {'reference':>10} {'ratio':>6}  range      best   GFLOP/s d / r")
    for (what, args, side) in sorted(times):
        if side != "dlgraph" or (what, args, "reference") not in times:
            continue
        d, t = times[(what, args, "dlgraph")], times[(what, args, "reference")]
        ratios = [a / b for a, b in zip(d, t)]
        label = labels.get((what, args), "")
        gd, gt = gflops.get((what, args, "dlgraph")), gflops.get((what, args, "reference"))
        gf = f"{statistics.median(gd):6.1f} / {statistics.median(gt):6.1f}" if gd and gt else ""
        name = f"{what}/{args}" + (f" ({label})" if label else "")
        print(f"{name:44} {statistics.median(d):9.1f}{unit[:2]} {statistics.median(t):9.1f}{unit[:2]} "
              f"{statistics.median(ratios):6.2f}  {min(ratios):.2f}-{max(ratios):.2f}  {min(d) / min(t):5.2f}  {gf}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin")
