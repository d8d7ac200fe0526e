"""SCRIBE-RSS in the discrete-event simulator, against the issue's anchors (issue 14, section 6).

For each overlay size (default 1,000 and 10,000 nodes; ``--quick`` 1,000 only), the same
``ScribeNode`` code a transport would drive runs in :mod:`feedmesh.mesh.overlay.sim` with
25 ms +-10% links: nodes join one by one, all but the publisher subscribe to one feed, the
publisher signs and multicasts records, an attacker pushes forged records at 50 subscribers, then
20% of the nodes (the group's root among them) die at once while publishing goes on
(:mod:`feedmesh.mesh.overlay.scenario`).

Baselines in the same run: polling (one request per subscriber per poll, so at least one per
subscriber per update), and the paper's arithmetic for Slashdot (17,700 subscribers, 2 KB a day,
polled half-hourly = 1.7 GB a day) beside what our publisher sends for the same day.

    PYTHONPATH=src .venv/bin/python benchmarks/mesh_scribe_sim.py            # 1,000 and 10,000
    PYTHONPATH=src .venv/bin/python benchmarks/mesh_scribe_sim.py --quick    # 1,000
    PYTHONPATH=src .venv/bin/python benchmarks/mesh_scribe_sim.py --nodes 100000

Last line: one JSON object, the largest size's figures at top level and every size under ``runs``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from nacl.signing import SigningKey

from feedmesh.mesh.overlay.scenario import FEED_URL, build_overlay, run_experiment
from feedmesh.mesh.records import FeedWriter

GOALS = {"publisher_msgs_per_update": 2, "delivery_p99_ms": 400, "duplicates_per_node_item": 0.05,
         "missed_after_churn": 0, "repair_s": 5.0, "tampered_delivered": 0}
SLASHDOT = {"subscribers": 17_700, "bytes_per_day": 2_000, "polls_per_day": 48, "items_per_day": 15}


def run(count: int, seed: int) -> dict:
    started = time.perf_counter()
    overlay = build_overlay(count, seed=seed, join_gap=min(0.02, 20.0 / count))
    built = time.perf_counter() - started
    outcome = run_experiment(count, seed=seed, overlay=overlay)
    return {
        "nodes": count,
        "subscribers": outcome.subscribers,
        "publisher_msgs_per_update": outcome.publisher_msgs_per_update,
        "polling_requests_per_update": outcome.subscribers,
        "delivery_p50_ms": round(outcome.delivery_p50_ms, 1),
        "delivery_p99_ms": round(outcome.delivery_p99_ms, 1),
        "duplicates_per_node_item": round(outcome.duplicates_per_node_item, 4),
        "forwarding_max": outcome.forwarding_max,
        "forwarding_mean": round(outcome.forwarding_mean, 3),
        "pastry_msgs_per_join": round(outcome.pastry_msgs_per_join, 1),
        "scribe_msgs_per_join": round(outcome.scribe_msgs_per_join, 2),
        "steady_missed": outcome.steady_missed,
        "missed_after_churn": outcome.missed_after_churn,
        "repair_s": outcome.repair_s,
        "root_killed": outcome.root_killed,
        "tampered_tried": outcome.tampered_tried,
        "tampered_delivered": outcome.tampered_delivered,
        "wall_s": round(time.perf_counter() - started, 1),
        "build_wall_s": round(built, 1),
    }


def slashdot_day(publisher_msgs_per_update: float) -> tuple[float, float]:
    """(polling bytes a day, our publisher's bytes a day) for the paper's Slashdot example."""
    polling = SLASHDOT["subscribers"] * SLASHDOT["polls_per_day"] * SLASHDOT["bytes_per_day"]
    writer = FeedWriter(SigningKey(b"\x01" * 32), FEED_URL)
    text = "x" * (SLASHDOT["bytes_per_day"] // SLASHDOT["items_per_day"])
    record_bytes = sum(len(writer.append({"id": str(i), "title": text}))
                       for i in range(SLASHDOT["items_per_day"]))
    return polling, record_bytes * publisher_msgs_per_update


def print_run(figures: dict) -> None:
    print(f"\n== {figures['nodes']:,} nodes ({figures['subscribers']:,} subscribers), "
          f"{figures['wall_s']} s wall (build {figures['build_wall_s']} s), "
          f"load {os.getloadavg()[0]:.1f}")
    rows = [
        ("publisher messages per update", figures["publisher_msgs_per_update"],
         f"polling: {figures['polling_requests_per_update']:,}", "<= 2"),
        ("delivery p50 ms", figures["delivery_p50_ms"], "", ""),
        ("delivery p99 ms", figures["delivery_p99_ms"], "gossipsub: 98% in 4 s", "<= 400"),
        ("duplicates per node per item", figures["duplicates_per_node_item"],
         "gossipsub D=8: 3-7", "<= 0.05"),
        ("forwarding per item: max / mean",
         f"{figures['forwarding_max']:.0f} / {figures['forwarding_mean']}", "", ""),
        ("messages per Pastry join", figures["pastry_msgs_per_join"], "", ""),
        ("messages per Scribe join", figures["scribe_msgs_per_join"], "", ""),
        ("items missed after 20% die", figures["missed_after_churn"], "", "0"),
        ("tree repair s", figures["repair_s"], "root among the dead: "
         + ("yes" if figures["root_killed"] else "no"), "<= 5"),
        ("tampered delivered / tried",
         f"{figures['tampered_delivered']} / {figures['tampered_tried']}", "", "0"),
    ]
    print(f"{'figure':34} {'measured':>14}  {'anchor':24} goal")
    for name, value, anchor, goal in rows:
        print(f"{name:34} {value!s:>14}  {anchor:24} {goal}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--quick", action="store_true", help="the 1,000-node case alone")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sizes = [1_000] if args.quick else args.nodes
    runs = []
    for count in sizes:
        figures = run(count, args.seed)
        print_run(figures)
        runs.append(figures)
    top = runs[-1]
    polling, ours = slashdot_day(top["publisher_msgs_per_update"])
    print(f"\nSlashdot (paper): {SLASHDOT['subscribers']:,} subscribers polling half-hourly a 2 KB "
          f"feed = {polling / 1e9:.2f} GB a day from the publisher; with SCRIBE-RSS the publisher "
          f"sends {SLASHDOT['items_per_day']} signed records a day = {ours / 1e3:.1f} KB a day")
    met = {key: (top[key] is not None and top[key] <= goal) for key, goal in GOALS.items()}
    print("goals met at", top["nodes"], "nodes:", ", ".join(f"{k}={'yes' if v else 'NO'}"
                                                              for k, v in met.items()))
    result = {key: top[key] for key in ("publisher_msgs_per_update", "delivery_p50_ms",
                                         "delivery_p99_ms", "duplicates_per_node_item",
                                         "missed_after_churn", "repair_s", "tampered_delivered",
                                         "nodes")}
    result.update(slashdot_polling_bytes_per_day=polling, slashdot_publisher_bytes_per_day=ours,
                  runs=runs)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
