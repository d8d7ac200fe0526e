"""`feedmesh demo` never deletes what it did not create, never empties a running demo's folder,
and says in one line why it cannot start."""

from __future__ import annotations

import io
import socket
import subprocess
import sys

import pytest
from rich.console import Console

from feedmesh.commands.demo import MARK, DemoFolderError, demo_folder, layout
from feedmesh.compose.demo import EXAMPLE_QUERIES, Demo
from feedmesh.store import Subscription


def test_a_folder_holding_someone_elses_files_is_refused_and_left_alone(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    with pytest.raises(DemoFolderError, match="holds files the demo did not put there"), \
            demo_folder(tmp_path):
        raise AssertionError("never reached")
    assert (tmp_path / "thesis.tex").read_text() == "years of work"
    assert not (tmp_path / MARK).exists()


def test_its_own_folder_is_emptied_at_each_start(tmp_path):
    folder = tmp_path / "demo"
    with demo_folder(folder):
        (folder / "hub.db").write_bytes(b"old run")
        (folder / "sub").mkdir()
    with demo_folder(folder):
        assert sorted(p.name for p in folder.iterdir()) == [MARK]


def test_a_running_demos_folder_is_not_emptied_by_a_second_demo(tmp_path):
    folder = tmp_path / "demo"
    with demo_folder(folder):
        (folder / "hub.db").write_bytes(b"in use")
        with pytest.raises(DemoFolderError, match="another feedmesh demo is running"), \
                demo_folder(folder):
            raise AssertionError("never reached")
        assert (folder / "hub.db").read_bytes() == b"in use"


@pytest.mark.slow
def test_a_busy_port_is_one_line_not_a_traceback(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "feedmesh", "demo", "--feeds", "10", "--port", str(port),
             "--data", str(tmp_path / "demo"), "--seconds", "1"],
            capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("feedmesh demo: ") and "address" in lines[0]


@pytest.mark.slow
def test_the_demo_runs_and_says_its_errors_are_on_purpose(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-m", "feedmesh", "demo", "--feeds", "60", "--port", str(port),
         "--data", str(tmp_path / "demo"), "--seconds", "12"],
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())  # the table wraps at the console's width
    assert "feedmesh is running" in out and f"http://127.0.0.1:{port}/f/" in out
    assert "(the farm injects faults on purpose)" in out
    assert "stopping: finishing in-flight work" in out
    assert (tmp_path / "demo" / MARK).exists()


def test_the_address_and_token_stay_on_an_80x24_screen():
    """The live view starts with the hub's address and the demo account's token (issue 33, item
    15): in an 80x24 terminal, the lines printed before the table scroll away once it draws;
    the view's own top lines stay (rich's Live crops a view taller than the screen at the
    bottom), and a full view fits."""
    demo = Demo(hub=None, base="http://127.0.0.1:8080", token="fm_1_" + "x" * 43,
                subs=[Subscription(id=n, account_id=1, name="", query=q, keep=10, reflector=0,
                                   generation=0, created_at=0.0, changed_at=0.0)
                      for n, q in enumerate(EXAMPLE_QUERIES)])
    stats = {"metrics": {"feedmesh_tier_articles_in_total{tier=filter}": 51234.0,
                         "feedmesh_matches_total": 812.0,
                         "feedmesh_hub_latency_seconds_count": 10.0,
                         "feedmesh_hub_latency_seconds_sum": 0.5,
                         "feedmesh_process_memory_bytes": 300 * 2**20},
             "last_crawl": {"fetched": 2000, "elapsed_s": 12.3, "ok": 1800, "delta": 8,
                            "not_modified": 60, "errors": {"timeout": 100, "parse:xml": 32}},
             "crawl_running": {"fetched": 1200, "new_entries": 10234}, "feeds": 2000,
             "entries_stored": 123456}
    console = Console(width=80, height=24, file=io.StringIO(), color_system=None)
    lines = ["".join(s.text for s in line).rstrip()
             for line in console.render_lines(layout(demo, stats, [10, 4, 0]))]
    assert len(lines) <= 24, "\n".join(lines)
    assert "http://127.0.0.1:8080/" in lines[0] and "Ctrl-C" in lines[0]
    assert lines[1] == f"demo account token: {demo.token}"
    assert any("first crawl" in ln or "last crawl" in ln for ln in lines)
