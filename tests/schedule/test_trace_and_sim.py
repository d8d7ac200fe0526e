"""Trace reading (bad input names the line), the simulator and ``feedmesh sim``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from feedmesh.cli import main
from feedmesh.schedule import SchedulerSettings, TraceError
from feedmesh.schedule.simulator import simulate, window_of
from feedmesh.schedule.synthetic import synthetic_trace
from feedmesh.schedule.trace import load_trace, write_trace

REAL = Path(__file__).resolve().parents[3] / "shared" / "traces" / "techblogs_pubdates.csv"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_unknown_and_missing_columns_name_line_1(tmp_path):
    with pytest.raises(TraceError, match=r"trace.csv:1: unknown column\(s\) 'publised_utc'"):
        load_trace(write(tmp_path, "feed_id,publised_utc\na,2024-01-01T00:00:00Z\n"))
    with pytest.raises(TraceError, match="no timestamp column"):
        load_trace(write(tmp_path, "feed_id,title\na,x\n"))
    trace = load_trace(write(tmp_path, "feed_id,extra,published_utc\na,1,2024-01-01T00:00Z\n"),
                       allow_extra_columns=True)
    assert trace.posting_count == 1


def test_bad_time_and_unsorted_rows_name_the_line(tmp_path):
    with pytest.raises(TraceError, match=r":3: published_utc 'yesterday' is not an ISO 8601"):
        load_trace(write(tmp_path, "feed_id,published_utc\na,2024-01-01T00:00:00Z\n"
                                   "a,yesterday\n"))
    messy = ("feed_id,published_utc\na,2024-01-02T00:00:00Z\nb,2024-01-03T00:00:00Z\n"
             "a,2024-01-01T00:00:00Z\n")
    with pytest.raises(TraceError, match=r":4: rows are neither grouped by feed nor sorted"):
        load_trace(write(tmp_path, messy))
    assert load_trace(write(tmp_path, messy), sort_rows=True).posting_count == 3
    grouped_descending = ("feed_id,published_utc\na,2024-01-03T00:00:00Z\na,2024-01-01T00:00Z\n"
                          "b,2024-01-02T00:00:00+09:00\n")
    trace = load_trace(write(tmp_path, grouped_descending))
    assert list(trace.times[0]) == sorted(trace.times[0])


def test_synthetic_trace_round_trips_through_csv(tmp_path):
    trace = synthetic_trace(feeds=20, days=10, seed=1)
    write_trace(trace, tmp_path / "s.csv")
    again = load_trace(tmp_path / "s.csv")
    assert again.feed_ids == trace.feed_ids
    for a, b in zip(trace.times, again.times, strict=True):
        assert np.allclose(a, b, atol=1e-3)


def test_synthetic_trace_has_the_papers_statistics():
    trace = synthetic_trace(feeds=3000, seed=4)
    per_week = trace.posting_count / 90 * 7 * 9634 / 3000
    assert 150_000 < per_week < 210_000  # Figure 3(a): ~180,000 a week for 9,634 feeds
    counts = np.array([len(t) for t in trace.times])
    assert counts.min() >= 1 and counts.max() > 300


def test_uniform_delay_is_half_the_interval_and_optimal_beats_it():
    window = window_of(synthetic_trace(feeds=300, days=30, seed=2), days=30, train_days=14)
    uniform = simulate(window, SchedulerSettings(policy="uniform", budget_per_feed_per_day=1))
    assert 600 < uniform.mean_delay_min < 800
    assert uniform.max_delay_min <= 1441
    assert uniform.fetches_per_feed_per_day == pytest.approx(1.0, rel=0.02)
    optimal = simulate(window, SchedulerSettings(policy="optimal", budget_per_feed_per_day=1))
    ours = simulate(window, SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=1))
    assert optimal.mean_delay_min < 0.8 * uniform.mean_delay_min
    assert ours.max_delay_min <= 2 * uniform.max_delay_min
    assert ours.fetches_per_feed_per_day == pytest.approx(1.0, rel=0.06)


def test_a_ten_entry_feed_loses_postings_when_polled_rarely():
    window = window_of(synthetic_trace(feeds=200, days=21, seed=3), days=21, train_days=7)
    rare = simulate(window, SchedulerSettings(policy="uniform", budget_per_feed_per_day=0.5))
    often = simulate(window, SchedulerSettings(policy="uniform", budget_per_feed_per_day=8))
    assert rare.lost_pct > often.lost_pct >= 0.0


def test_sim_cli_json_has_the_issue_fields(capsys):
    assert main(["sim", "--trace", "synthetic", "--feeds", "150", "--days", "21",
                 "--train-days", "7", "--policies", "uniform,feedmesh", "--budget", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"policy", "mean_delay_min", "median_delay_min", "p90_delay_min", "max_delay_min",
            "fetches", "lost_pct"} <= set(out["policies"][0])
    assert "oracle_mean_delay_min" in out
    assert out["oracle_mean_delay_min"] <= min(p["mean_delay_min"] for p in out["policies"])


def test_sim_cli_rejects_bad_input_with_status_2(tmp_path, capsys):
    assert main(["sim", "--trace", str(tmp_path / "missing.csv")]) == 2
    assert "cannot open trace" in capsys.readouterr().err
    assert main(["sim", "--trace", "synthetic", "--budget", "-1"]) == 2
    assert main(["sim", "--trace", "synthetic", "--policies", "best"]) == 2
    assert "unknown policy" in capsys.readouterr().err


@pytest.mark.skipif(not REAL.exists(), reason="the shared techblogs trace is not beside the repo")
def test_real_trace_loads_and_feedmesh_beats_uniform_on_it():
    window = window_of(load_trace(REAL), days=91, train_days=14, only_complete_feeds=True)
    assert len(window.feed_ids) == 630
    uniform = simulate(window, SchedulerSettings(policy="uniform", budget_per_feed_per_day=1))
    ours = simulate(window, SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=1))
    assert ours.mean_delay_min < 0.8 * uniform.mean_delay_min
    assert ours.max_delay_min <= 2 * uniform.max_delay_min
