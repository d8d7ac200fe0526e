"""Owners for new feeds between two mappings (locality/owners.py): table-driven."""

from __future__ import annotations

import pytest

from feedmesh.locality import place_new_feeds

OWNED = {1: ("http://a.example/1", "eu"), 2: ("http://a.example/2", "eu"),
         3: ("http://a.example/3", "na"), 4: ("http://b.example/1", "na"),
         5: ("http://b.example/2", "na"), 6: ("http://c.example/1", "asia")}


@pytest.mark.parametrize(("new", "owned", "fallback", "want"), [
    # the crawler holding most of the server's feeds, whoever has fewer feeds overall
    ({10: "http://a.example/9"}, OWNED, "x", {10: "eu"}),
    ({10: "http://b.example:80/9"}, OWNED, "x", {10: "na"}),  # the same server, port explicit
    # a server nobody fetches: the crawler with the fewest feeds, then the first name
    ({10: "http://d.example/1"}, OWNED, "x", {10: "asia"}),
    ({10: "http://d.example/1", 11: "http://e.example/1"}, OWNED, "x",
     {10: "asia", 11: "asia"}),  # asia 2 feeds then, eu 2: asia first by name
    ({10: "http://d.example/1", 11: "http://d.example/2"}, OWNED, "x",
     {10: "asia", 11: "asia"}),  # the second follows the first to its server's crawler
    # nothing owned yet: the fallback (the crawler deciding)
    ({10: "http://a.example/1", 11: "https://z.example/"}, {}, "me", {10: "me", 11: "me"}),
    # not an http URL: no server, the fewest-feeds rule
    ({10: "ftp://a.example/1"}, OWNED, "x", {10: "asia"}),
    # a tie between two crawlers of one server: fewer feeds overall, then name
    ({10: "http://t.example/3"}, {1: ("http://t.example/1", "b"), 2: ("http://t.example/2", "a"),
                                  3: ("http://u.example/1", "a")}, "x", {10: "b"}),
])
def test_new_feeds_go_near_their_server_else_to_the_least_loaded(new, owned, fallback, want):
    assert place_new_feeds(new, owned, fallback) == want
