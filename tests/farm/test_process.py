"""The farm as a separate process, and its command line."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from feedmesh.farm import FarmConfig, FarmProcess
from tests.eventually import eventually


def test_farm_process_serves_reports_and_stops(farm_process):
    with urllib.request.urlopen(farm_process.feed_url(3), timeout=10) as response:
        assert response.status == 200 and response.read()
    requests = farm_process.requests(feed=3)
    assert requests and requests[-1].path == "/feeds/3" and requests[-1].status == 200
    assert farm_process.stats()["feeds"] == 200
    assert isinstance(farm_process.truth(3), list)
    assert farm_process.rss_bytes() > 0


def test_process_with_hosts_and_overrides_then_clean_stop():
    config = FarmConfig(feeds=6, hosts=2, seed=3, faults="none", fault_overrides={1: "gone"})
    process = FarmProcess(config).start()
    try:
        assert [u.split(":")[1] for u in process.base_urls] == ["//127.0.1.1", "//127.0.1.2"]
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(process.feed_url(1), timeout=10)
        assert error.value.code == 410
    finally:
        process.stop()
    assert process.process.returncode == 0  # SIGTERM -> a clean exit


def test_cli_rejects_bad_settings_with_status_2():
    result = subprocess.run([sys.executable, "-m", "feedmesh", "farm", "--feeds", "5",
                             "--faults", "nonsense=0.1", "--port", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "unknown fault 'nonsense'" in result.stderr


async def test_prerender_fills_the_cache_before_serving(farm_factory):
    async with farm_factory(feeds=30, faults="default", prerender=True,
                            fault_overrides={0: "timeout", 1: "flood"}) as farm:
        stats = farm.model.cache_stats()
        assert stats["documents"] >= 25 and stats["renders"] == stats["documents"]
        assert 0 not in farm.model._docs  # faults that serve no document are skipped
        assert len(farm.model._docs[1].posts) == 10_000  # floods are always rendered at start


def test_every_config_field_reaches_the_child():
    config = FarmConfig(feeds=4, seed=9, faults="none", slow_delay_s=0.2, retry_after_s=7,
                        fault_overrides={2: "rate_limit"}, format_mix={"atom1.0": 1.0})
    with FarmProcess(config) as process:
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(process.feed_url(2), timeout=10)
        assert error.value.code == 429 and error.value.headers["Retry-After"] == "7"
        with urllib.request.urlopen(process.feed_url(0), timeout=10) as response:
            assert b"http://www.w3.org/2005/Atom" in response.read(400)


async def test_a_farm_process_keeps_what_survives_out_of_full_collections(monkeypatch):
    """The standalone farm moves what survived out of the collector's reach every few seconds
    (its full collections grew to half a second at 100,000 feeds, silencing every feed)."""
    import asyncio
    import gc

    from feedmesh.farm import cli

    monkeypatch.setattr(cli, "FREEZE_INTERVAL_S", 0.01)
    before = gc.get_freeze_count()
    stop = asyncio.Event()
    task = asyncio.create_task(cli._freeze_survivors(stop))
    try:
        survivor = [object() for _ in range(10)]  # noqa: F841 - alive across a freeze
        await eventually(lambda: gc.get_freeze_count() > before, what="survivors are frozen")
    finally:
        stop.set()
        await eventually(task.done, what="the freezer ends when asked")
        await task
        gc.unfreeze()  # give this test process its own collector back
