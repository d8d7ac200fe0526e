"""`feedmesh demo` never deletes what it did not create, never empties a running demo's folder,
and says in one line why it cannot start."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from feedmesh.commands.demo import MARK, DemoFolderError, demo_folder


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
