"""``feedmesh sim``: replay a posting trace against fetch policies and print the paper's table.

    feedmesh sim --trace ../shared/traces/techblogs_pubdates.csv --only-complete-feeds \\
                 --policies uniform,optimal,feedmesh --budget 1 [--train-days 14] [--json]
    feedmesh sim --trace synthetic --seed 2005 --policies all --budget 1 --plot fig13.png

``--trace synthetic`` generates the paper-statistics trace in memory (``--write-trace FILE``
saves it as CSV). Exit status: 0 done, 2 bad input (with a message naming what and where).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .errors import ScheduleError
from .policy_names import ABLATION_POLICY_NAMES, KNOWN_POLICY_NAMES, POLICY_NAMES
from .settings import SchedulerSettings
from .simulator import PolicyResult, SimWindow, oracle_for, simulate, window_of

__all__ = ["configure", "format_table", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", required=True,
                        help="CSV with feed_id and published_utc or first_seen_utc, or 'synthetic'")
    parser.add_argument("--policies", default="all",
                        help=f"comma-separated, or 'all' ({', '.join(POLICY_NAMES)}), or "
                        "'paper' (Table 1: uniform, optimal-timing, optimal-allocation, optimal)")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="fetches per feed per day (default 1)")
    parser.add_argument("--train-days", type=float, default=14.0,
                        help="days of history the scheduler starts with (default 14)")
    parser.add_argument("--days", type=float, default=90.0,
                        help="replay the last N days of the trace (default 90; 0 = all)")
    parser.add_argument("--only-complete-feeds", action="store_true",
                        help="drop feeds whose first posting is after the window start")
    parser.add_argument("--sort-rows", action="store_true", help="accept rows in any order")
    parser.add_argument("--allow-extra-columns", action="store_true",
                        help="ignore unknown CSV columns instead of failing")
    parser.add_argument("--seed", type=int, default=2005, help="synthetic trace seed")
    parser.add_argument("--feeds", type=int, default=9634, help="synthetic trace feeds")
    parser.add_argument("--write-trace", metavar="CSV", help="write the synthetic trace and exit")
    parser.add_argument("--learn-once", action="store_true",
                        help="the paper's protocol: plans learned from the training days are "
                        "kept (no daily refit); Table 1 was measured so")
    parser.add_argument("--tick", type=float, default=60.0,
                        help="the simulated crawler polls the scheduler every N s (default 60)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--plot", metavar="PNG", help="draw delay versus budget (Figure 13)")
    parser.add_argument("--plot-budgets", default="0.5,1,2,4",
                        help="budgets for --plot (default 0.5,1,2,4)")


def _policies(text: str) -> list[str]:
    """Policy names from a comma list; ``all`` and ``paper`` expand to their sets."""
    groups = {"all": list(POLICY_NAMES), "paper": ["uniform", *ABLATION_POLICY_NAMES, "optimal"]}
    names: list[str] = []
    for item in (p.strip() for p in text.split(",")):
        for name in groups.get(item, [item] if item else []):
            if name not in names:
                names.append(name)
    unknown = [p for p in names if p not in KNOWN_POLICY_NAMES]
    if unknown or not names:
        raise ScheduleError(f"unknown policy {', '.join(unknown) or '(none given)'}; "
                            f"known: {', '.join(KNOWN_POLICY_NAMES)}, or all / paper")
    return names


def load_window(args: argparse.Namespace) -> SimWindow:
    from .trace import load_trace

    if args.trace == "synthetic":
        from .synthetic import synthetic_trace

        if args.feeds < 1:
            raise ScheduleError(f"--feeds must be at least 1, got {args.feeds}")
        trace = synthetic_trace(feeds=args.feeds, seed=args.seed)
    else:
        trace = load_trace(args.trace, sort_rows=args.sort_rows,
                           allow_extra_columns=args.allow_extra_columns)
    return window_of(trace, days=args.days or None, train_days=args.train_days,
                     only_complete_feeds=args.only_complete_feeds)


def learn_once_settings(window: SimWindow) -> dict[str, float]:
    """Settings for the paper's protocol: learn from the training days, then keep the plans
    (no refit, no cluster refit during the replay)."""
    beyond = window.end - window.start + 30 * 86400.0
    return {"refit_interval_s": beyond, "cluster_refit_interval_s": beyond}


def compare(window: SimWindow, policies: list[str], budget: float, *, tick_s: float = 60.0,
            progress=None, overrides: dict[str, object] | None = None,
            oracle: bool = True) -> tuple[list[PolicyResult], float]:
    """Every policy's result at ``budget`` fetches per feed per day (``overrides``: more
    settings, the same for every policy), and the oracle bound (NaN when not asked for)."""
    results = []
    for name in policies:
        settings = SchedulerSettings(policy=name, budget_per_feed_per_day=budget,
                                     **(overrides or {}))  # type: ignore[arg-type]
        result = simulate(window, settings, tick_s=tick_s)
        if progress:
            progress(result)
        results.append(result)
    if not oracle:
        return results, float("nan")
    fetches = budget * len(window.feed_ids) * window.test_days
    return results, oracle_for(window, fetches)


def format_table(results: list[PolicyResult], oracle: float) -> str:
    head = (f"{'policy':<18}{'mean':>9}{'median':>9}{'p90':>9}{'max':>9}{'std':>8}"
            f"{'fetches':>10}{'/feed/day':>10}{'lost %':>8}")
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(f"{r.policy:<18}{r.mean_delay_min:>9.1f}{r.median_delay_min:>9.1f}"
                     f"{r.p90_delay_min:>9.1f}{r.max_delay_min:>9.0f}{r.std_delay_min:>8.1f}"
                     f"{r.fetches:>10d}{r.fetches_per_feed_per_day:>10.3f}{r.lost_pct:>8.2f}")
    lines.append(f"{'oracle bound':<18}{oracle:>9.1f}   (clairvoyant, same budget; delays in "
                 "minutes)")
    return "\n".join(lines)


def _plot(window: SimWindow, policies: list[str], budgets: list[float], path: str,
          tick_s: float, overrides: dict[str, object] | None = None) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - the plot extra is missing
        raise ScheduleError("--plot needs matplotlib: pip install 'feedmesh[plot]'") from error
    curves: dict[str, list[float]] = {p: [] for p in policies}
    oracle = []
    for budget in budgets:
        results, bound = compare(window, policies, budget, tick_s=tick_s, overrides=overrides)
        for r in results:
            curves[r.policy].append(r.mean_delay_min)
        oracle.append(bound)
    figure, axes = plt.subplots(figsize=(7.5, 4.8))
    for name, values in curves.items():
        axes.plot(budgets, values, marker="o", label=name)
    # the oracle is 0 once there are more fetches than postings: not drawable on a log axis
    shown = [(b, o) for b, o in zip(budgets, oracle, strict=True) if o > 0]
    if shown:
        label = "oracle bound (clairvoyant)"
        if len(shown) < len(budgets):
            first_zero = min(b for b, o in zip(budgets, oracle, strict=True) if o <= 0)
            label += f"; 0 from {first_zero:g}/day"
        axes.plot(*zip(*shown, strict=True), linestyle="--", color="grey", label=label)
    axes.set_title(f"mean delay against the budget ({len(window.feed_ids)} feeds, "
                   f"{window.test_days:g} test days)")
    axes.set_xlabel("fetches per feed per day")
    axes.set_ylabel("mean delay (minutes)")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(budgets, [f"{b:g}" for b in budgets])
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def run(args: argparse.Namespace) -> int:
    try:
        policies = _policies(args.policies)
        if not (args.budget > 0):
            raise ScheduleError(f"--budget must be > 0 fetches per feed per day, got {args.budget}")
        if args.tick < 0:
            raise ScheduleError(f"--tick must be >= 0 seconds, got {args.tick}")
        if args.write_trace:
            from .synthetic import synthetic_trace
            from .trace import write_trace

            if args.trace != "synthetic":
                raise ScheduleError(
                    "--write-trace writes the synthetic trace: use --trace synthetic")
            write_trace(synthetic_trace(feeds=args.feeds, seed=args.seed), args.write_trace)
            return 0
        budgets = [float(b) for b in args.plot_budgets.split(",")] if args.plot else []
        if any(not b > 0 for b in budgets):
            raise ScheduleError(f"--plot-budgets must all be > 0, got {args.plot_budgets}")
        began = time.perf_counter()
        window = load_window(args)
    except ScheduleError as error:
        print(f"feedmesh sim: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"feedmesh sim: {error}", file=sys.stderr)
        return 2
    feeds = len(window.feed_ids)
    floor_per_day = 86400.0 / SchedulerSettings().max_interval_s
    if args.budget < floor_per_day and not args.json:
        print(f"note: a budget of {args.budget:g}/feed/day is below one fetch per feed per "
              f"T_max ({floor_per_day:.3f}/day): every feed gets the same share",
              file=sys.stderr)
    if not args.json:
        print(f"trace {args.trace}: {feeds} feeds ({window.dropped_feeds} dropped), "
              f"{sum(len(t) for t in window.test_times())} postings over {window.test_days:g} "
              f"test days after {args.train_days:g} training days; budget {args.budget:g} "
              "fetches/feed/day")
    overrides = learn_once_settings(window) if args.learn_once else None
    results, oracle = compare(window, policies, args.budget, tick_s=args.tick,
                              overrides=overrides)
    if args.plot:
        _plot(window, policies, budgets, args.plot, args.tick, overrides)
    if args.json:
        print(json.dumps({
            "trace": args.trace, "feeds": feeds, "dropped_feeds": window.dropped_feeds,
            "postings": sum(len(t) for t in window.test_times()),
            "budget_per_feed_per_day": args.budget, "train_days": args.train_days,
            "test_days": window.test_days,
            "policies": [{
                "policy": r.policy, "mean_delay_min": round(r.mean_delay_min, 2),
                "median_delay_min": round(r.median_delay_min, 2),
                "p90_delay_min": round(r.p90_delay_min, 2),
                "max_delay_min": round(r.max_delay_min, 2),
                "std_delay_min": round(r.std_delay_min, 2), "fetches": r.fetches,
                "fetches_per_feed_per_day": round(r.fetches_per_feed_per_day, 4),
                "lost_pct": round(r.lost_pct, 3), "seconds": round(r.seconds, 2)}
                for r in results],
            "oracle_mean_delay_min": round(oracle, 2),
            "seconds": round(time.perf_counter() - began, 2)}))
    else:
        print(format_table(results, oracle))
        print(f"({time.perf_counter() - began:.1f} s)")
    return 0
