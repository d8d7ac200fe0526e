"""FeedEx at equal freshness, in the simulator (issue 13 section 4): the publisher requests per feed
per day that stand-alone nodes (SLN) and the mesh (XCH) need for a mean lag of at most 10 minutes.

    .venv/bin/python benchmarks/mesh_feedex_freshness.py [--nodes 160] [--target-min 10]
        [--sln-hours 0.25 0.33 0.5 1] [--xch-hours 16 8 4 2]

The same network as ``mesh_feedex_sim.py`` (the real FeedEx node core on a simulated network,
70 farm feeds, 20 per node, 15% churn, 22 hours): stand-alone runs (no exchange) and exchange runs
at each fetch interval given, longest first; each mode stops at the first interval whose mean
lag (over the surviving nodes) is within the target. Requests to publishers are counted, not
derived. Prints a table, then as its LAST line one JSON object with ``sln_requests_per_feed_day``
and ``xch_requests_per_feed_day`` (at the longest interval that met the target, null if none
did), their ratio ``load_taken_off_publishers`` and every run.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from feedmesh.mesh.feedex import FeedExSettings
from feedmesh.mesh.feedex.sim import SimConfig, simulate


def measure(nodes: int, interval_h: float, exchange: bool, seed: int) -> dict:
    settings = FeedExSettings(did_cache_bloom=20_000)
    result = simulate(SimConfig(nodes=nodes, interval_s=interval_h * 3600.0, seed=seed,
                                exchange=exchange, settings=settings))
    return {"mode": "xch" if exchange else "sln", "interval_hours": interval_h,
            "lag_min": round(result.xch.lag_min, 2), "coverage": round(result.xch.coverage, 4),
            "publisher_requests_per_feed_day": round(result.publisher_requests_per_feed_day, 1),
            "calls_per_node_min": round(result.calls_per_node_min, 3),
            "sim_seconds": round(result.seconds, 1)}


def search(nodes: int, intervals: list[float], exchange: bool, target: float,
           seed: int) -> tuple[dict | None, list[dict]]:
    runs = []
    for interval_h in sorted(intervals, reverse=True):
        runs.append(measure(nodes, interval_h, exchange, seed))
        r = runs[-1]
        print(f"{r['mode']:4} every {interval_h:>5g} h: lag {r['lag_min']:>7.2f} min, coverage "
              f"{r['coverage']:.1%}, {r['publisher_requests_per_feed_day']:>8} requests/feed/day",
              flush=True)
        if r["lag_min"] <= target:
            return r, runs
    return None, runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=160)
    parser.add_argument("--target-min", type=float, default=10.0)
    parser.add_argument("--sln-hours", type=float, nargs="+", default=[1.0, 0.5, 0.33, 0.25])
    parser.add_argument("--xch-hours", type=float, nargs="+", default=[16.0, 8.0, 4.0, 2.0])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    began = time.perf_counter()
    sln, sln_runs = search(args.nodes, args.sln_hours, False, args.target_min, args.seed)
    xch, xch_runs = search(args.nodes, args.xch_hours, True, args.target_min, args.seed)
    sln_req = sln["publisher_requests_per_feed_day"] if sln else None
    xch_req = xch["publisher_requests_per_feed_day"] if xch else None
    print(f"\nmean lag <= {args.target_min:g} min, {args.nodes} nodes: stand-alone every "
          f"{sln['interval_hours'] if sln else '?'} h, {sln_req} requests/feed/day; mesh every "
          f"{xch['interval_hours'] if xch else '?'} h, {xch_req} requests/feed/day")
    print(json.dumps({
        "nodes": args.nodes, "target_lag_min": args.target_min,
        "sln_requests_per_feed_day": sln_req, "xch_requests_per_feed_day": xch_req,
        "load_taken_off_publishers": round(sln_req / xch_req, 2) if sln_req and xch_req else None,
        "sln_interval_hours": sln["interval_hours"] if sln else None,
        "xch_interval_hours": xch["interval_hours"] if xch else None,
        "runs": sln_runs + xch_runs, "load": os.getloadavg()[0],
        "seconds": round(time.perf_counter() - began, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
