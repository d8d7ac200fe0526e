"""The hub on PostgreSQL (``embedded_hub(store_url=...)``): the same tiers, every store in a real
PostgreSQL database, and nothing of a reflector's state on the local disk."""

from __future__ import annotations

from feedmesh.compose import open_ingest_store
from feedmesh.compose.embedded import embedded_hub
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.match import article_from_entry, parse_query
from tests.eventually import eventually

from .conftest import ORIGIN, hub_settings

QUERY = "people OR time OR world"


def expected_newest(url: str, query: str, keep: int) -> list[int]:
    """The newest ``keep`` stored entries the query matches (the offline oracle)."""
    store = open_ingest_store(url)
    try:
        urls = {row.id: row.state.url for row in store.feeds()}
        parsed = parse_query(query)
        ids = [item.id for item in store.entries_after(0, 10**9)
               if parsed.matches(article_from_entry(item.entry, urls[item.feed_id]))]
    finally:
        store.close()
    return sorted(ids)[-keep:][::-1]


async def test_a_replacement_hub_with_an_empty_data_folder_serves_the_same_feeds(
        tmp_path, postgres_url):
    config = FarmConfig(feeds=20, seed=6, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm:
        hub = embedded_hub(hub_settings(str(tmp_path / "first")), store_url=postgres_url)
        await hub.start()
        account, token = await hub.front.create_account("ann")
        sub = await hub.front.add_subscription(account.id, name="", query=QUERY, keep=5)
        await hub.add_feeds([farm.feed_url(i) for i in range(20)])
        await eventually(lambda: hub.store.entry_count() >= 100)
        await eventually(lambda: hub.reflectors[0].held(sub.id) == 5)
        await hub.stop()
    assert not any((tmp_path / "first").glob("*.db"))  # nothing of the stores on this disk
    expected = expected_newest(postgres_url, QUERY, 5)
    # The first machine is gone, and so is the farm (nothing new can arrive): another hub, with
    # an empty data folder, on the same database.
    hub = embedded_hub(hub_settings(str(tmp_path / "second")), store_url=postgres_url)
    await hub.start()
    try:
        assert (await hub.front.authenticate(token)).id == account.id
        after = [i.entry_id for i in await hub.reflectors[0].items(sub.id)]
    finally:
        await hub.stop()
    assert after == expected
