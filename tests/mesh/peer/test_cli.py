"""``feedmesh tracker`` and ``feedmesh peer`` as a person runs them: two peers find each other
through the tracker, ``feedmesh peer status`` shows the neighbour, and the neighbours are on disk
for the next start. Bad flags get a clear error, not a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, free_port


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


async def _start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "feedmesh", *args, env=_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def _run(*args: str) -> tuple[int, str, str]:
    process = await _start(*args)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode, out.decode(), err.decode()


async def _line(process: asyncio.subprocess.Process, text: str) -> str:
    while True:
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert line, f"the process ended before printing {text!r}"
        if text in line:
            return line


async def test_two_peers_meet_through_the_tracker(mesh, tmp_path):
    opml = tmp_path / "mine.opml"
    outlines = "".join(f'<outline xmlUrl="{mesh.url(f)}" text="feed {f}"/>' for f in BUSY)
    opml.write_text(f'<opml version="2.0"><head><title>mine</title></head><body>{outlines}'
                    "</body></opml>")
    tracker_port = free_port("127.0.3.40")
    tracker = await _start("tracker", "--listen", f"127.0.3.40:{tracker_port}")
    processes = [tracker]
    try:
        await _line(tracker, "feedmesh tracker on")
        datas = []
        for i in (1, 2):
            data = tmp_path / f"peer{i}"
            datas.append(data)
            host = f"127.0.3.4{i}"
            peer = await _start("peer", "--opml", str(opml), "--listen",
                                f"{host}:{free_port(host)}", "--local", "127.0.0.1:0",
                                "--tracker", f"http://127.0.3.40:{tracker_port}", "--data",
                                str(data), "--allow-network", "127.0.0.0/8")
            processes.append(peer)
            line = await _line(peer, "point your reader at")
            assert "/all.rss" in line
        async def neighbours(data) -> str:
            code, out, err = await _run("peer", "status", "--data", str(data))
            assert code == 0, err
            return out if "1 neighbours" in out else ""
        for data, other in ((datas[0], "127.0.3.42"), (datas[1], "127.0.3.41")):
            out = await eventually(lambda data=data: neighbours(data), timeout=60)
            assert other in out and "feeds 2" in out
    finally:
        for process in reversed(processes):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        codes = [await asyncio.wait_for(p.wait(), 60) for p in processes]
    assert codes == [0, 0, 0]
    saved = json.loads((datas[0] / "neighbours.json").read_text())
    assert [row[0] for row in saved] == ["127.0.3.42"]


async def test_bad_flags_get_a_clear_error(tmp_path):
    code, _, err = await _run("peer", "--local", "10.1.2.3:8401", "--data", str(tmp_path))
    assert code == 2 and "loopback" in err and "Traceback" not in err
    code, _, err = await _run("peer", "--listen", "nowhere", "--data", str(tmp_path))
    assert code == 2 and "HOST:PORT" in err and "Traceback" not in err
    code, _, err = await _run("peer", "status", "--data", str(tmp_path / "none"))
    assert code == 2 and "no peer has run" in err
    code, _, err = await _run("tracker", "--listen", "127.0.3.50:x")
    assert code == 2 and "HOST:PORT" in err
