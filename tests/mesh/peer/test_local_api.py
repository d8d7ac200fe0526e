"""The local API: a feed added through it is fetched, advertised to neighbours and served by the
proxy; a bad call gets a 400 saying why; the API never listens beyond loopback."""

from __future__ import annotations

import aiohttp
import pytest

from feedmesh.mesh.peer import check_loopback
from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, LAZY


async def test_a_feed_added_through_the_local_api_is_followed(mesh):
    peer = await mesh.peer(0, [BUSY[0]], LAZY)
    other = await mesh.peer(1, [BUSY[0]], LAZY)
    added = mesh.url(BUSY[1])
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{peer.proxy.url}/api/feeds", json={"url": added}) as response:
            assert response.status == 200
            answer = await response.json()
        assert answer["new"] and answer["rss"].startswith(peer.proxy.url)

        async def served() -> bool:
            async with session.get(answer["atom"]) as response:
                return response.status == 200 and b"<entry>" in await response.read()
        await eventually(served)  # fetched, archived, served
        async with session.get(f"{peer.proxy.url}/") as response:
            index = await response.json()
        assert added in {feed["url"] for feed in index["feeds"]}
        for bad in (b"[1, 2]", b'{"url": "ftp://x"}', b"not json"):
            async with session.post(f"{peer.proxy.url}/api/feeds", data=bad) as response:
                assert response.status == 400
                assert (await response.json())["error"]
        async with session.post(f"{peer.proxy.url}/api/pull",
                                json={"url": "http://127.0.0.1:1/unknown"}) as response:
            assert response.status == 400 and "not followed" in (await response.json())["error"]
    # the neighbour learns at the next advertisement that this peer now reads the feed
    await eventually(lambda: other.feedex.node.neighbours.get(peer.feedex.address) is not None
                     and other.feedex.node.neighbours[peer.feedex.address].subset.get(added) == 0)


@pytest.mark.parametrize("host", ["10.0.0.1", "0.0.0.0", "example.org"])
def test_the_local_api_listens_on_loopback_only(host):
    with pytest.raises(ValueError, match="loopback"):
        check_loopback(host)
