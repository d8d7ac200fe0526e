"""Benchmark of the monitor (issue: "The monitor"): the paper's tables, ours against them, speed.

    .venv/bin/python benchmarks/schedule.py [--feeds 10000] [--policies all]

1. The synthetic trace (paper statistics, seed 2005; 10,000 feeds x 90 days, 14 training days)
   replayed against every policy at 1 fetch per feed per day: Table 1 / Table 2 of the paper and
   ours; the wall time of that replay is the simulator-speed figure.
2. The real trace ``../shared/traces/techblogs_pubdates.csv`` (last 91 days, feeds complete over
   the window, 14 training days) at 1 fetch per feed per day.

Prints a human table, then as its LAST line one JSON object with ``optimal_over_uniform_synth``,
``cgmage_over_optimal_synth``, ``ours_over_optimal_synth``, ``ours_over_optimal_real``,
``ours_max_over_uniform_max_synth`` and ``sim_seconds``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from feedmesh.schedule.cli import compare, format_table
from feedmesh.schedule.policies import POLICY_NAMES
from feedmesh.schedule.simulator import window_of
from feedmesh.schedule.synthetic import synthetic_trace
from feedmesh.schedule.trace import load_trace

REAL_TRACE = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / \
    "techblogs_pubdates.csv"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=2005)
    parser.add_argument("--policies", default=",".join(POLICY_NAMES))
    parser.add_argument("--real-trace", default=str(REAL_TRACE))
    args = parser.parse_args()
    policies = args.policies.split(",")

    began = time.perf_counter()
    trace = synthetic_trace(feeds=args.feeds, seed=args.seed)
    synth = window_of(trace, days=90, train_days=14)
    generated = time.perf_counter() - began
    print(f"synthetic trace: {len(synth.feed_ids)} feeds, "
          f"{sum(len(t) for t in synth.test_times())} test postings over {synth.test_days:g} days "
          f"(generated in {generated:.1f} s); budget 1 fetch/feed/day", flush=True)
    began = time.perf_counter()
    results_synth, oracle_synth = compare(synth, policies, 1.0)
    total = time.perf_counter() - began
    sim_seconds = sum(r.seconds for r in results_synth)
    print(format_table(results_synth, oracle_synth))
    print(f"simulated {len(policies)} policies in {sim_seconds:.1f} s "
          f"(+ oracle bound: {total - sim_seconds:.1f} s)\n", flush=True)

    real = window_of(load_trace(args.real_trace), days=91, train_days=14,
                     only_complete_feeds=True)
    print(f"real trace {Path(args.real_trace).name}: {len(real.feed_ids)} feeds "
          f"({real.dropped_feeds} not complete over the window dropped), "
          f"{sum(len(t) for t in real.test_times())} test postings over {real.test_days:g} days",
          flush=True)
    results_real, oracle_real = compare(real, policies, 1.0)
    print(format_table(results_real, oracle_real))

    def by_name(results):
        return {r.policy: r for r in results}

    s, r = by_name(results_synth), by_name(results_real)
    figures = {
        "optimal_over_uniform_synth": s["optimal"].mean_delay_min / s["uniform"].mean_delay_min,
        "cgmage_over_optimal_synth": s["cgm-age"].mean_delay_min / s["optimal"].mean_delay_min,
        "ours_over_optimal_synth": s["feedmesh"].mean_delay_min / s["optimal"].mean_delay_min,
        "ours_over_optimal_real": r["feedmesh"].mean_delay_min / r["optimal"].mean_delay_min,
        "ours_max_over_uniform_max_synth":
            s["feedmesh"].max_delay_min / s["uniform"].max_delay_min,
        "ours_max_over_uniform_max_real":
            r["feedmesh"].max_delay_min / r["uniform"].max_delay_min,
        "sim_seconds": sim_seconds,
    }
    targets = [
        ("optimal / uniform mean delay (synthetic)", "0.61 +- 0.05 (paper 395/645)",
         figures["optimal_over_uniform_synth"]),
        ("cgm-age / optimal mean delay (synthetic)", "> 1, paper 1.49",
         figures["cgmage_over_optimal_synth"]),
        ("feedmesh / optimal mean delay (synthetic)", "<= 0.90", figures["ours_over_optimal_synth"]),
        ("feedmesh / optimal mean delay (real)", "<= 0.90", figures["ours_over_optimal_real"]),
        ("feedmesh max / uniform max (synthetic)", "<= 2",
         figures["ours_max_over_uniform_max_synth"]),
        ("simulator seconds, all policies (synthetic)", "< 60", sim_seconds),
    ]
    print("\ntarget                                        goal                           measured")
    for name, goal, value in targets:
        print(f"{name:<46}{goal:<31}{value:8.3f}")
    print(json.dumps({k: round(v, 4) for k, v in figures.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
