"""The farm's list of recent FeedEx clients per feed (farm/peerlist.py), rule by rule."""

from __future__ import annotations

from feedmesh.farm.peerlist import RecentPeers


def test_each_client_is_told_the_others_newest_first_within_the_ttl_and_cap():
    peers = RecentPeers(per_feed=3, ttl_s=100.0)
    assert peers.note(1, "127.0.3.11", "8400", 0.0) == ""  # the first hears of nobody
    peers.note(1, "127.0.3.12", "8400", 10.0)
    told = peers.note(1, "127.0.3.13", " 8401 ", 20.0)
    assert told == ('<http://127.0.3.12:8400/feedex/v1>; rel="feedex-peer", '
                    '<http://127.0.3.11:8400/feedex/v1>; rel="feedex-peer"')
    assert peers.note(2, "127.0.3.14", "8400", 20.0) == ""  # per feed
    # the same host on another port is another client; the oldest goes past the cap
    peers.note(1, "127.0.3.11", "9000", 30.0)
    assert ("127.0.3.11", 8400) not in peers.clients(1) and len(peers.clients(1)) == 3
    # past the ttl a client is no longer listed
    told = peers.note(1, "127.0.3.13", "8401", 125.0)
    assert told == '<http://127.0.3.11:9000/feedex/v1>; rel="feedex-peer"'


def test_a_port_that_is_not_one_is_ignored():
    peers = RecentPeers()
    for stated in ("", "abc", "0", "70000", "-1"):
        assert peers.note(1, "127.0.3.11", stated, 0.0) == ""
    assert peers.clients(1) == []
