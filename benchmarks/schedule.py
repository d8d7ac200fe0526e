"""Benchmark of the monitor (issue: "The monitor"): the paper's tables, ours against them, speed.

    .venv/bin/python benchmarks/schedule.py [--feeds 10000] [--repeat 3] [--no-bound]

1. Speed: the synthetic trace (paper statistics, seed 2005; 10,000 feeds x 90 days, 14 training
   days) replayed against the seven policies at 1 fetch per feed per day, ``--repeat`` times; the
   figure is the median over runs of the CPU seconds of the seven replays (one core: numpy's and
   numba's thread pools are limited to one thread below), with wall time and load beside it.
   numba compiles its kernels once per install (cached on disk); a warm-up replay does that
   before the timed runs and its time is printed apart.
2. The same run's table: Table 2 of the paper and ours, the oracle (clairvoyant) bound, and the
   model bound: the least expected delay any policy could reach knowing every feed's true rate
   function (with and without feedmesh's maximum-delay floors).
3. Table 1 of the paper under the paper's protocol (plans learned from the first 14 days, then
   kept): uniform, retrieval scheduling only, resource allocation only, combined.
4. The real trace ``../shared/traces/techblogs_pubdates.csv`` (last 91 days, feeds complete over
   the window, 14 training days) at 1 fetch per feed per day, with the paper's policy also as
   printed (rates = posts in the window / days, no smoothing).

Prints human tables, then as its LAST line one JSON object with ``optimal_over_uniform_synth``,
``cgmage_over_optimal_synth``, ``ours_over_optimal_synth``, ``ours_over_optimal_real``,
``ours_max_over_uniform_max_synth`` and ``sim_seconds`` (and more, named).
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # "on one core": before numpy and numba are imported

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from feedmesh.schedule.cli import compare, format_table, learn_once_settings
from feedmesh.schedule.policy_names import POLICY_NAMES
from feedmesh.schedule.settings import SchedulerSettings
from feedmesh.schedule.simulator import (
    PolicyResult,
    oracle_for,
    simulate,
    window_of,
)
from feedmesh.schedule.synthetic import (
    DAILY_CONTRAST,
    model_bound,
    synthetic_model,
    synthetic_trace,
)
from feedmesh.schedule.trace import load_trace

REAL_TRACE = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / \
    "techblogs_pubdates.csv"
PAPER_TABLE_1 = {  # strategy: (mean, max, std) minutes, one retrieval per feed per day
    "uniform": (645, 1440, 392), "optimal-timing": (581, 1440, 405),
    "optimal-allocation": (433, 9120, 542), "optimal": (395, 10073, 560),
}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


def by_name(results: list[PolicyResult]) -> dict[str, PolicyResult]:
    return {r.policy: r for r in results}


def ablation(synth, real, optimal_synth: PolicyResult, optimal_real: PolicyResult) -> None:
    """feedmesh with one idea taken out at a time, on both traces (mean delay / optimal's)."""
    from feedmesh.schedule.policies import FeedmeshPolicy

    variants = [
        ("feedmesh", {}, {}),
        ("  without the max-delay floors", {}, {"max_delay_target_s": 7 * 86400.0}),
        ("  paper's window rates", {"bayes_rates": False}, {}),
        ("  cluster centroid as profile", {"own_profiles": False}, {}),
        ("  same rhythm every weekday", {"weekly": False}, {}),
    ]
    print("\nfeedmesh ablation (mean delay, its ratio to optimal, max, fetches/feed/day):")
    print(f"{'variant':<34}{'synthetic':>10}{'/opt':>7}{'max':>7}{'f/d':>7}"
          f"{'real':>9}{'/opt':>7}{'max':>7}{'f/d':>7}")
    for label, switches, overrides in variants:
        row = f"{label:<34}"
        for window, base in ((synth, optimal_synth), (real, optimal_real)):
            settings = SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=1.0,
                                         **overrides)  # type: ignore[arg-type]
            result = simulate(window, settings,
                              policy=lambda s, k=switches: FeedmeshPolicy(s, **k))
            ratio = result.mean_delay_min / base.mean_delay_min
            row += (f"{result.mean_delay_min:>10.1f}{ratio:>7.3f}"
                    f"{result.max_delay_min:>7.0f}{result.fetches_per_feed_per_day:>7.3f}")
        print(row, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=2005)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (median reported)")
    parser.add_argument("--no-bound", action="store_true", help="skip the model bound")
    parser.add_argument("--ablation", action="store_true",
                        help="also run feedmesh with one idea taken out at a time")
    parser.add_argument("--real-trace", default=str(REAL_TRACE))
    args = parser.parse_args()
    policies = list(POLICY_NAMES)

    began = time.perf_counter()
    trace = synthetic_trace(feeds=args.feeds, seed=args.seed)
    synth = window_of(trace, days=90, train_days=14)
    print(f"synthetic trace (seed {args.seed}, daily contrast {DAILY_CONTRAST}): "
          f"{len(synth.feed_ids)} feeds, {sum(len(t) for t in synth.test_times())} test postings "
          f"over {synth.test_days:g} days (generated in {time.perf_counter() - began:.1f} s); "
          "budget 1 fetch/feed/day", flush=True)

    began = time.perf_counter()
    warm = window_of(synthetic_trace(feeds=60, days=21, seed=1), days=21, train_days=7)
    compare(warm, policies, 1.0, oracle=False)
    print(f"warm-up (numba compiles or loads its cached kernels): "
          f"{time.perf_counter() - began:.1f} s", flush=True)

    runs = []
    results_synth: list[PolicyResult] = []
    for run in range(args.repeat):
        before = load()
        results_synth, _ = compare(synth, policies, 1.0, oracle=False)
        cpu = sum(r.cpu_seconds for r in results_synth)
        wall = sum(r.seconds for r in results_synth)
        runs.append((cpu, wall, before, load()))
        print(f"run {run + 1}: {len(policies)} policies in {cpu:.1f} s CPU, {wall:.1f} s wall "
              f"(load average 1/5 min before {before}, after {runs[-1][3]})", flush=True)
    sim_seconds = statistics.median(r[0] for r in runs)
    sim_wall = statistics.median(r[1] for r in runs)
    fetches = len(synth.feed_ids) * synth.test_days
    oracle_synth = oracle_for(synth, fetches)
    print(format_table(results_synth, oracle_synth))
    print("per policy, CPU s: " + ", ".join(f"{r.policy} {r.cpu_seconds:.1f}"
                                            for r in results_synth))
    bounds = {}
    if not args.no_bound:
        began = time.perf_counter()
        model = synthetic_model(feeds=args.feeds, seed=args.seed)
        gap = SchedulerSettings().max_delay_target_s
        bounds = {"model_bound_min": model_bound(model, 1.0),
                  "model_bound_floors_min": model_bound(model, 1.0, max_gap_s=gap)}
        print(f"model bound (knows every feed's true rate function): "
              f"{bounds['model_bound_min']:.1f} min; with feedmesh's {gap / 3600:g} h gap "
              f"floors: {bounds['model_bound_floors_min']:.1f} min "
              f"({time.perf_counter() - began:.1f} s)")
    print(flush=True)

    once = learn_once_settings(synth)
    table1 = by_name(compare(synth, ["optimal-timing", "optimal-allocation", "optimal"], 1.0,
                             overrides=once, oracle=False)[0])
    table1["uniform"] = by_name(results_synth)["uniform"]
    print("Table 1, the paper's protocol (plans learned from the 14 training days, then kept):")
    print(f"{'strategy':<22}{'mean':>8}{'/unif':>7}{'max':>8}{'std':>6}   "
          f"{'paper mean':>10}{'/unif':>7}{'max':>7}{'std':>6}")
    base, paper_base = table1["uniform"].mean_delay_min, PAPER_TABLE_1["uniform"][0]
    for name, (p_mean, p_max, p_std) in PAPER_TABLE_1.items():
        r = table1[name]
        print(f"{name:<22}{r.mean_delay_min:>8.1f}{r.mean_delay_min / base:>7.3f}"
              f"{r.max_delay_min:>8.0f}{r.std_delay_min:>6.0f}   {p_mean:>10}"
              f"{p_mean / paper_base:>7.3f}{p_max:>7}{p_std:>6}")
    print(flush=True)

    real = window_of(load_trace(args.real_trace), days=91, train_days=14,
                     only_complete_feeds=True)
    print(f"real trace {Path(args.real_trace).name}: {len(real.feed_ids)} feeds "
          f"({real.dropped_feeds} not complete over the window dropped), "
          f"{sum(len(t) for t in real.test_times())} test postings over {real.test_days:g} days",
          flush=True)
    results_real, oracle_real = compare(real, policies, 1.0)
    print(format_table(results_real, oracle_real))
    literal = simulate(real, SchedulerSettings(policy="optimal", budget_per_feed_per_day=1.0,
                                               rate_smoothing_posts=0.0))
    print(f"optimal as printed (window count / days, a feed silent for 14 days gets the T_max "
          f"floor only): mean {literal.mean_delay_min:.1f}, max {literal.max_delay_min:.0f}")

    s, r = by_name(results_synth), by_name(results_real)
    if args.ablation:
        ablation(synth, real, s["optimal"], r["optimal"])
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
        "sim_wall_seconds": sim_wall,
        "optimal_over_uniform_synth_paper_protocol":
            table1["optimal"].mean_delay_min / base,
        "timing_only_over_uniform_synth": table1["optimal-timing"].mean_delay_min / base,
        "allocation_only_over_uniform_synth": table1["optimal-allocation"].mean_delay_min / base,
        "ours_fetches_over_optimal_synth": s["feedmesh"].fetches / s["optimal"].fetches,
        "ours_fetches_over_optimal_real": r["feedmesh"].fetches / r["optimal"].fetches,
        "ours_over_optimal_as_printed_real": r["feedmesh"].mean_delay_min /
            literal.mean_delay_min,
    }
    if bounds:
        optimal = s["optimal"].mean_delay_min
        figures["model_bound_over_optimal_synth"] = bounds["model_bound_min"] / optimal
        figures["model_bound_floors_over_optimal_synth"] = \
            bounds["model_bound_floors_min"] / optimal
    targets = [
        ("optimal / uniform mean delay (synthetic)", "0.61 +- 0.05 (paper 395/645)",
         figures["optimal_over_uniform_synth"]),
        ("cgm-age / optimal mean delay (synthetic)", "> 1, paper 1.49",
         figures["cgmage_over_optimal_synth"]),
        ("feedmesh / optimal mean delay (synthetic)", "<= 0.90",
         figures["ours_over_optimal_synth"]),
        ("feedmesh / optimal mean delay (real)", "<= 0.90", figures["ours_over_optimal_real"]),
        ("feedmesh max / uniform max (synthetic)", "<= 2",
         figures["ours_max_over_uniform_max_synth"]),
        ("feedmesh max / uniform max (real)", "<= 2", figures["ours_max_over_uniform_max_real"]),
        ("simulator CPU s, 7 policies (median)", "< 60", sim_seconds),
    ]
    if bounds:
        targets.insert(3, ("  model bound with floors / optimal (synth)",
                           "(no policy can go below)",
                           figures["model_bound_floors_over_optimal_synth"]))
    print("\ntarget                                        goal                           measured")
    for name, goal, value in targets:
        print(f"{name:<46}{goal:<31}{value:8.3f}")
    print(json.dumps({k: round(v, 4) for k, v in figures.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
