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
            async with session.post(f"{peer.proxy.url}/api/feeds", data=bad,
                                    headers=JSON) as response:
                assert response.status == 400
                assert (await response.json())["error"]
        async with session.post(f"{peer.proxy.url}/api/pull",
                                json={"url": "http://127.0.0.1:1/unknown"}) as response:
            assert response.status == 400 and "not followed" in (await response.json())["error"]
    # the neighbour learns at the next advertisement that this peer now reads the feed
    await eventually(lambda: other.feedex.node.neighbours.get(peer.feedex.address) is not None
                     and other.feedex.node.neighbours[peer.feedex.address].subset.get(added) == 0)


JSON = {"Content-Type": "application/json"}


async def test_the_local_proxy_answers_only_its_own_origin(mesh):
    """DNS rebinding (a foreign Host), a cross-origin form (text/plain, no preflight) and a
    foreign Origin are refused; invalid feed URLs get a 400 saying what is wrong; the person's
    own calls (any of the loopback names, with the port) still work."""
    peer = await mesh.peer(0, [BUSY[0]], LAZY)
    proxy = peer.proxy
    feed_id = peer.archive.feed_id(mesh.url(BUSY[0]))
    followed = len(await peer.archive.feeds())
    evil = mesh.url(BUSY[1])
    async with aiohttp.ClientSession() as session:
        for host in ("evil.example", f"evil.example:{proxy.port}", "127.0.0.1",
                     f"127.0.0.1:{proxy.port + 1}", f"localhost.evil.example:{proxy.port}"):
            for path in ("/", "/api/status", f"/feeds/{feed_id}.rss", "/all.json"):
                async with session.get(proxy.url + path, headers={"Host": host}) as response:
                    assert response.status == 421, (host, path)
                    assert b"not this proxy's" in await response.read()
            async with session.post(f"{proxy.url}/api/feeds", json={"url": evil},
                                    headers={"Host": host}) as response:
                assert response.status == 421
        for host in (f"localhost:{proxy.port}", f"127.0.0.1:{proxy.port}",
                     f"[::1]:{proxy.port}", f"{proxy.host}:{proxy.port}"):
            async with session.get(f"{proxy.url}/api/status", headers={"Host": host}) as response:
                assert response.status == 200, host
        # a page's cross-origin form: a "simple" request, sent without a preflight
        async with session.post(f"{proxy.url}/api/feeds", data=f'{{"url": "{evil}"}}',
                                headers={"Content-Type": "text/plain",
                                         "Origin": "http://evil.example"}) as response:
            assert response.status == 403
        async with session.post(f"{proxy.url}/api/feeds", data=f'{{"url": "{evil}"}}',
                                headers={"Content-Type": "text/plain"}) as response:
            assert response.status == 403
            assert "application/json" in (await response.json())["error"]
        for origin in ("http://evil.example", "null", f"http://127.0.0.1:{proxy.port + 1}"):
            async with session.post(f"{proxy.url}/api/feeds", json={"url": evil},
                                    headers={"Origin": origin}) as response:
                assert response.status == 403, origin
        assert len(await peer.archive.feeds()) == followed  # nothing was followed
        assert proxy.refused["foreign_host"] >= 25 and proxy.refused["foreign_origin"] >= 4
        for bad, reason in (("http://a b/", "space"), ("http://[::1", "not a valid URL"),
                            ("http://127.0.0.1:99999/feed", "port outside 1-65535"),
                            ("http://user:pw@127.0.0.1/feed", "credentials"),
                            ("javascript:alert(1)", "http:// or https://")):
            async with session.post(f"{proxy.url}/api/feeds", json={"url": bad}) as response:
                assert response.status == 400, bad
                error = (await response.json())["error"]
                assert reason in error and "\n" not in error, error
        assert len(await peer.archive.feeds()) == followed
        # the person's own page (same origin, JSON) may
        async with session.post(f"{proxy.url}/api/feeds", json={"url": evil},
                                headers={"Origin": proxy.url}) as response:
            assert response.status == 200 and (await response.json())["new"]


# the addresses it must refuse, every interface among them
@pytest.mark.parametrize("host", ["10.0.0.1", "0.0.0.0", "example.org"])  # noqa: S104 - refused
def test_the_local_api_listens_on_loopback_only(host):
    with pytest.raises(ValueError, match="loopback"):
        check_loopback(host)
