"""What a person sees when something is wrong, the same way from every command: one line,
``feedmesh COMMAND: what, where, why``, exit status 2, never a traceback; and a command's own
usage for a flag it does not take."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest


def feedmesh(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "feedmesh", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def busy_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize("command", ["serve", "web", "farm", "tracker", "reflector"])
def test_a_busy_port_is_one_line_and_exit_2_from_every_command(tmp_path, busy_port, command):
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "hub.db").write_bytes(b"")  # the reflector's state is checked after its port
    args = {
        "serve": ["--port", str(busy_port), "--data", str(tmp_path / "serve")],
        "web": ["--bus", "nats://127.0.0.1:1", "--reflectors", "http://127.0.0.1:2",
                "--listen", f"127.0.0.1:{busy_port}", "--data", str(hub)],
        "farm": ["--feeds", "3", "--port", str(busy_port)],
        "tracker": ["--listen", f"127.0.0.1:{busy_port}"],
        "reflector": ["--bus", "nats://127.0.0.1:1", "--state", str(hub / "hub.db"),
                      "--listen", f"127.0.0.1:{busy_port}"],
    }[command]
    done = feedmesh(command, *args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "[Errno" not in done.stderr, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"feedmesh {command}: "), lines
    assert str(busy_port) in lines[0] and "address" in lines[0].lower(), lines


def test_serve_checks_its_inputs_before_it_starts_anything(tmp_path):
    data = tmp_path / "data"
    done = feedmesh("serve", "--opml", str(tmp_path / "missing.opml"), "--data", str(data),
                    "--port", "0")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"feedmesh serve: cannot read the OPML list "
                                   f"{tmp_path / 'missing.opml'}: No such file or directory")
    assert not data.exists()  # no folder made, no hub started, nothing crawled


def test_a_flag_a_command_does_not_take_prints_that_commands_usage():
    done = feedmesh("serve", "--no-such-flag")
    assert done.returncode == 2
    assert "usage: feedmesh serve" in done.stderr
    assert done.stderr.strip().endswith(
        "feedmesh serve: error: unrecognized arguments: --no-such-flag")


def test_a_reader_that_leaves_early_is_no_error(tmp_path):
    listing = tmp_path / "up.json"
    listing.write_text(json.dumps({"pid": os.getpid(), "web": "http://127.0.0.1:1", "processes": [
        {"role": "crawler", "pid": os.getpid()} for _ in range(200)]}))
    # A real pipe that closes early: the shell is the point.
    command = f"{sys.executable} -m feedmesh stats --up {tmp_path} --json | head -c 20"
    done = subprocess.run(command, shell=True, capture_output=True, text=True,  # noqa: S602
                          timeout=60)
    assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr, done.stderr
    assert done.stdout.startswith("[")
