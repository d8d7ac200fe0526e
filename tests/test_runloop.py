"""The event loop the long-running commands run on (feedmesh.runloop)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from feedmesh import runloop

uvloop = pytest.importorskip("uvloop")


async def _loop_type() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def test_uvloop_is_the_loop_where_it_is_installed(monkeypatch):
    monkeypatch.delenv(runloop.ENV, raising=False)
    assert runloop.loop_name() == "uvloop"
    assert runloop.run(_loop_type()) == "uvloop"


@pytest.mark.parametrize("value", ["asyncio", " AsyncIO "])
def test_asyncio_s_own_loop_when_asked(monkeypatch, value):
    monkeypatch.setenv(runloop.ENV, value)
    assert runloop.loop_name() == "asyncio"
    assert runloop.run(_loop_type()) == "asyncio"


def test_an_unknown_loop_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv(runloop.ENV, "trio")
    coro = _loop_type()
    with pytest.raises(ValueError, match=r"FEEDMESH_LOOP='trio'.*uvloop, asyncio"):
        runloop.run(coro)
    assert coro.cr_frame is None  # closed, not left to warn "never awaited"


@pytest.mark.parametrize("argv", [["serve", "--data", "{tmp}", "--port", "0"],
                                  ["farm", "--feeds", "1", "--port", "0"]],
                         ids=["serve", "farm"])
def test_a_command_says_what_is_wrong_with_the_loop_asked_for(tmp_path, argv):
    """A long-running command refuses a bad FEEDMESH_LOOP with one line, no traceback
    (``serve`` says it itself, ``farm`` through the command line's own catch)."""
    env = {"FEEDMESH_LOOP": "trio", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "feedmesh",
                           *(a.format(tmp=tmp_path) for a in argv)],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 2
    assert f"feedmesh {argv[0]}: FEEDMESH_LOOP='trio'" in done.stderr
    assert "Traceback" not in done.stderr
