"""The hub with its filter tier in other processes: `feedmesh serve --external-filters` (crawler,
reflector and web here) and two `feedmesh filter` shard processes, meeting on a real NATS server,
crawling a real farm. What the reflector holds must be exactly what the reference matcher says,
including what was crawled before the filter processes were even started."""

from __future__ import annotations

import signal
import subprocess
import uuid

from feedmesh.compose.embedded import running_hub
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import StaticResolver
from tests.commands.test_filter_role import start_filter
from tests.eventually import eventually

from .conftest import ORIGIN, hub_settings
from .test_hub import QUERY, expected_newest, held_newest


async def test_filter_shards_in_their_own_processes_miss_nothing(tmp_path, nats_url):
    namespace = f"t{uuid.uuid4().hex[:10]}"
    config = FarmConfig(feeds=30, seed=7, faults="none", speed=3600.0, origin=ORIGIN)
    settings = hub_settings(str(tmp_path), filters=2, external_filters=True)
    filters: list[subprocess.Popen[str]] = []
    async with (
        FarmServer(config) as farm,
        running_hub(settings, "127.0.0.1", 0, resolver=StaticResolver({}),
                    bus=nats_url, bus_namespace=namespace) as (hub, _),
    ):
        await hub.add_feeds([farm.feed_url(i) for i in range(30)])
        # Crawled while no filter runs: the articles wait in the filters' groups.
        await eventually(lambda: hub.crawler.cycles >= 2)
        await eventually(lambda: all(
            hub.bus.depths().get(f"articles/filter-{n}", (0, 0))[0] > 0 for n in (0, 1)))
        try:
            filters = [start_filter(tmp_path, nats_url, namespace, shard)
                       for shard in ("0/2", "1/2")]
            account, _ = await hub.front.create_account("ann")
            # A keep larger than all matches, so that "nothing lost" is checked exactly. It
            # returns once both filter processes applied it.
            sub = (await hub.front.add_subscription(account.id, name="", query=QUERY,
                                              keep=5000)).id
            reflector = hub.reflectors[0]
            await eventually(lambda: reflector.held(sub) >= 5, timeout=60)
            cycles = hub.crawler.cycles
            await eventually(lambda: hub.crawler.cycles >= cycles + 2)
            await hub.stop_crawling()  # no more crawling; what was published is drained below
            await hub.crawler.aclose()
            assert await hub.drain(timeout=60)
        finally:
            for process in filters:
                process.send_signal(signal.SIGTERM)
            errors = [process.communicate(timeout=60)[1] for process in filters]
    assert [process.returncode for process in filters] == [0, 0], errors
    assert not any("Traceback" in text for text in errors), errors
    final = held_newest(tmp_path, sub, 5000)
    assert len(final) == len(set(final)) > 5
    assert final == expected_newest(tmp_path, QUERY, 5000)


async def test_external_filters_need_a_nats_bus(tmp_path):
    import pytest

    from feedmesh.compose.embedded import embedded_hub

    with pytest.raises(ValueError, match="need a NATS bus"):
        embedded_hub(hub_settings(str(tmp_path), external_filters=True))
