"""``feedmesh map`` against the real farm (in its own process) with an emulated geography."""

from __future__ import annotations

import json
import urllib.request

import pytest

from feedmesh.cli import main
from feedmesh.farm import FarmConfig, FarmProcess, Geography

EU, ASIA = "127.0.1.211", "127.0.1.212"


@pytest.fixture(scope="module")
def farm():
    geography = Geography(clients={EU: "eu", ASIA: "asia"}, jitter=0.0, access_ms_max=0.0)
    config = FarmConfig(feeds=12, hosts=3, seed=5, faults="none", geography=geography)
    with FarmProcess(config) as process:
        yield process


def test_map_probes_assigns_saves_and_reassigns(farm, tmp_path, capsys):
    opml = tmp_path / "feeds.opml"
    with urllib.request.urlopen(farm.opml_url, timeout=10) as response:
        opml.write_bytes(response.read())
    matrix, first = tmp_path / "rtt.json", tmp_path / "first.json"
    assert main(["map", "--feeds", str(opml), "--crawler", f"eu={EU}", "--crawler",
                 f"asia={ASIA}", "--allow-network", "127.0.0.0/8", "--probes", "1",
                 "--save-matrix", str(matrix), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first.write_text(json.dumps(out))
    mapping = out["mapping"]
    assert len(mapping) == 12 and out["groups"] == 3 and out["probe_failures"] == 0
    # Feed i is on host i % 3: 127.0.1.2 is in Europe, 127.0.1.3 in Asia.
    assert all(mapping[farm.feed_url(i)] == "eu" for i in range(1, 12, 3))
    assert all(mapping[farm.feed_url(i)] == "asia" for i in range(2, 12, 3))
    saved = json.loads(matrix.read_text())["rtt_ms"]
    assert saved["eu"][f"127.0.1.3:{farm.port}"] >= 250.0

    # A third crawler in Europe joins; the saved matrix (with its row added) stands in for probes.
    saved["eu-2"] = dict(saved["eu"])
    matrix.write_text(json.dumps({"rtt_ms": saved}))
    assert main(["map", "--feeds", str(opml), "--crawler", f"eu={EU}", "--crawler",
                 f"asia={ASIA}", "--crawler", "eu-2=", "--matrix", str(matrix),
                 "--previous", str(first), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["algorithm"] == "reassign" and 1 <= again["moved"] <= 4
    assert again["crawlers"]["eu-2"]["feeds"] == again["moved"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--feeds", "/nonexistent.opml", "--crawler", "a=", "--matrix", "x"],
     "feed list /nonexistent.opml: cannot read it"),
    (["--feeds", "LIST", "--crawler", "a=", "--matrix", "/nonexistent.json"],
     "latency matrix /nonexistent.json: cannot read it"),
    (["--feeds", "LIST", "--crawler", "a=", "--crawler", "a=", "--matrix", "x"],
     "crawler names must be distinct"),
    (["--feeds", "LIST", "--crawler", "a=", "--matrix", "MATRIX"],
     "has no column for host group"),
])
def test_bad_input_exits_2_saying_what(tmp_path, capsys, argv, message):
    listing = tmp_path / "feeds.txt"
    listing.write_text("# two feeds\nhttp://h1.example/a\nhttp://h2.example/b\n")
    matrix = tmp_path / "m.json"
    matrix.write_text('{"rtt_ms": {"a": {"h1.example:80": 10}}}')
    argv = [str(listing) if a == "LIST" else str(matrix) if a == "MATRIX" else a for a in argv]
    assert main(["map", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
