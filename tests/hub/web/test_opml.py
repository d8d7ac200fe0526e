"""A list of feeds goes in and comes out as a reader left it: folders, titles and sites kept;
importing it again says what was already followed; outlines that are no feed are listed."""

from __future__ import annotations

from feedmesh.feeds.opml import parse_opml
from tests.hub.web.conftest import assert_error

XML = {"Content-Type": "text/x-opml"}


def listing(farm) -> bytes:
    return f"""<?xml version="1.0"?>
<opml version="2.0"><head><title>mine</title></head><body>
  <outline text="News">
    <outline text="One" xmlUrl="{farm.feed_url(0)}" htmlUrl="http://one.example/"/>
    <outline text="Deep"><outline text="Two" xmlUrl="{farm.feed_url(1)}"/></outline>
  </outline>
  <outline text="Three" xmlUrl="{farm.feed_url(2)}"/>
  <outline text="a note, not a feed"/>
</body></opml>""".encode()


async def test_folders_and_sites_survive_the_round_trip(hub_env, ann):
    status, body = await ann.call("POST", "/api/opml", data=listing(hub_env.farm), headers=XML)
    assert status == 200, body
    assert (body["added"], body["already_followed"]) == (3, 0)
    assert body["skipped"] == ["line 8: 'a note, not a feed' has no feed URL (xmlUrl)"]
    status, sources = await ann.call("GET", "/api/sources")
    by_url = {s["url"]: s for s in sources["sources"]}
    one = by_url[hub_env.farm.feed_url(0)]
    assert (one["category"], one["html_url"]) == ("News", "http://one.example/")
    assert by_url[hub_env.farm.feed_url(1)]["category"] == "News/Deep"
    status, exported = await ann.call("GET", "/api/opml")
    assert status == 200
    again = {o.url: o for o in parse_opml(exported.encode()).outlines}
    assert {(o.category, o.html_url) for o in again.values()} == {
        ("News", "http://one.example/"), ("News/Deep", ""), ("", "")}


async def test_importing_again_says_what_was_already_followed(hub_env, ann):
    await ann.call("POST", "/api/opml", data=listing(hub_env.farm), headers=XML)
    status, body = await ann.call("POST", "/api/opml", data=listing(hub_env.farm), headers=XML)
    assert status == 200 and (body["added"], body["already_followed"]) == (0, 3)
    assert [s["new"] for s in body["sources"]] == [False, False, False]
    url = hub_env.farm.feed_url(3)
    status, first = await ann.call("POST", "/api/sources", {"url": url})
    assert status == 201 and first["source"]["new"]
    status, second = await ann.call("POST", "/api/sources", {"url": url})
    assert status == 200 and not second["source"]["new"]
    assert second["source"]["id"] == first["source"]["id"]


async def test_an_opml_with_no_body_is_refused(hub_env, ann):
    status, body = await ann.call("POST", "/api/opml", data=b"<opml version='2.0'/>",
                                  headers=XML)
    assert "no <body>" in assert_error(status, body, 400, "invalid_opml")["message"]


async def test_the_subscriptions_opml_in_each_format(hub_env, ann):
    status, body = await ann.call("POST", "/api/subscriptions", {"query": "law", "name": "L"})
    sub = body["subscription"]
    for kind in ("rss", "atom", "json"):
        status, opml = await ann.call("GET", f"/api/subscriptions.opml?format={kind}")
        assert status == 200
        (outline,) = parse_opml(opml.encode()).outlines
        assert outline.url == sub["feed_urls"][kind] and outline.title == "feedmesh: L"
    status, body = await ann.call("GET", "/api/subscriptions.opml?format=xml")
    assert "rss, atom or json" in assert_error(status, body, 400, "invalid_format")["message"]
