"""The farm's emulated geography: answers to a placed client are held back by its region's round
trip to the host's region, measured from a real fetcher bound to its own loopback address."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest

from feedmesh.farm import FarmConfig, FarmConfigError, FarmServer, Geography, GeographyError
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.model import FetchOutcome

CLIENT = "127.0.1.2"
# Hosts 127.0.1.1 (na), .2 (eu), .3 (asia); the client is in Europe.
GEOGRAPHY = Geography(clients={CLIENT: "eu"}, jitter=0.0, access_ms_max=0.0)


def _settings(source: str) -> FetchSettings:
    return FetchSettings(allow_networks=("127.0.0.0/8",), source_address=source,
                         total_timeout_s=5.0)


async def test_a_far_host_answers_after_its_round_trips_a_near_one_sooner():
    config = FarmConfig(feeds=6, hosts=3, seed=4, faults="none", geography=GEOGRAPHY)
    async with FarmServer(config) as farm, Fetcher(_settings(CLIENT)) as fetcher:
        far = await fetcher.fetch(farm.feed_url(2))           # asia: 250 ms a round trip
        near = await fetcher.fetch(farm.feed_url(1))          # eu: 20 ms
        again = await fetcher.fetch(farm.feed_url(5))         # asia again, connection reused
    assert far.outcome == near.outcome == again.outcome == FetchOutcome.OK
    far_rounds = GEOGRAPHY.rounds(far.wire_bytes, new_connection=True)
    assert far_rounds >= 2
    assert far.elapsed_s >= 0.250 * far_rounds
    assert near.elapsed_s < 0.250
    assert 0.250 * GEOGRAPHY.rounds(again.wire_bytes, new_connection=False) <= again.elapsed_s
    assert again.elapsed_s < far.elapsed_s  # no handshake on a kept-alive connection


async def test_clients_the_geography_does_not_place_are_not_delayed():
    config = FarmConfig(feeds=3, hosts=3, seed=4, faults="none", geography=GEOGRAPHY)
    async with FarmServer(config) as farm, Fetcher(_settings("127.0.1.9")) as fetcher:
        result = await fetcher.fetch(farm.feed_url(2))
    assert result.outcome == FetchOutcome.OK and result.elapsed_s < 0.250


def test_slow_start_rounds_and_one_sided_jitter():
    geography = Geography(jitter=0.5)
    window = 10 * 1460
    assert [geography.rounds(n, False) for n in (0, window, window + 1, 3 * window,
                                                 3 * window + 1, 7 * window + 1)] == [
        1, 1, 2, 2, 3, 4]
    assert geography.rounds(100, True) == 2
    assert geography.delay_s(0.1, 0, False, 0.0) == pytest.approx(0.1)
    assert geography.delay_s(0.1, 0, False, 0.5) == pytest.approx(0.1 * (1 + 0.5 * 0.6931), 1e-3)
    assert geography.round_trip_s("127.0.0.1", 0, seed=1) is None


def test_each_host_has_its_own_fixed_access_latency():
    geography = Geography(clients={CLIENT: "na"}, access_ms_max=10.0)
    rtts = [geography.round_trip_s(CLIENT, i, seed=1) for i in (0, 3, 6)]  # all in na
    assert all(0.030 <= r <= 0.040 for r in rtts) and len(set(rtts)) == 3
    assert rtts == [geography.round_trip_s(CLIENT, i, seed=1) for i in (0, 3, 6)]


@pytest.mark.parametrize(("fields", "message"), [
    ({"rtt_ms": [[1.0]]}, "rtt_ms must be a 3x3 matrix"),
    ({"clients": {"10.0.0.1": "eu"}}, "client '10.0.0.1' is not a loopback address"),
    ({"clients": {CLIENT: "mars"}}, "client 127.0.1.2 is in unknown region 'mars'"),
    ({"host_regions": ["eu", "moon"]}, "host 1 is in unknown region 'moon'"),
    ({"regions": ["a", "a"], "rtt_ms": [[1.0, 1.0], [1.0, 1.0]]}, "regions must be distinct"),
])
def test_bad_geographies_say_what_is_wrong(fields, message):
    with pytest.raises(GeographyError, match=message):
        Geography(**fields)


def test_host_regions_must_name_every_host():
    with pytest.raises(FarmConfigError, match="host_regions names 2 hosts, the farm has 3"):
        FarmConfig(hosts=3, geography=Geography(host_regions=["eu", "na"]))


def test_the_command_line_reads_a_geography_file_and_places_clients(tmp_path):
    from feedmesh.farm.cli import _geography

    path = tmp_path / "geo.json"
    path.write_bytes(msgspec.json.encode(Geography(regions=["x", "y"],
                                                   rtt_ms=[[10.0, 50.0], [50.0, 10.0]])))
    geography = _geography(str(path), [(CLIENT, "y")])
    assert geography.regions == ["x", "y"] and geography.clients == {CLIENT: "y"}
    assert _geography("wan3", []).rtt_ms[1][2] == 250.0
    path.write_text(json.dumps({"regions": ["x"], "rtt_ms": [[1.0, 2.0]]}))
    result = subprocess.run([sys.executable, "-m", "feedmesh", "farm", "--port", "0",
                             "--geography", str(path)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 2
    assert "not a geography" in result.stderr and "rtt_ms must be a 1x1 matrix" in result.stderr
    assert "Traceback" not in result.stderr
