"""The mesh's marks on an entry (issue 32 item 8): who republished it and that it was the feed's
state when followed are namespaced elements (``fm:republishedBy``, ``fm:backlog``; JSON Feed:
``_feedmesh``), never a ``<category>`` a reader would show; an entry without them has none."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from feedmesh.feeds import parse_feed
from feedmesh.feeds.render import render_feed
from feedmesh.feeds.render_base import MESH_NAMESPACE
from feedmesh.model import Entry, FeedInfo

INFO = FeedInfo(title="Legacy Daily", link="http://127.0.0.1:8080/",
                self_link="http://127.0.0.1:8080/feeds/1")
KEY = "Qm9ndXMga2V5IGZvciBhIHRlc3Q="
MARKED = Entry(key="k1", guid="urn:post:1", title="post 1", link="http://127.0.0.1:8080/1",
               summary="text", categories=("news",), republished_by=KEY, backlog=True)
PLAIN = Entry(key="k2", guid="urn:post:2", title="post 2", link="http://127.0.0.1:8080/2",
              summary="text")
ITEM = {"rss2.0": "channel/item", "rss1.0": "{http://purl.org/rss/1.0/}item",
        "atom1.0": "{http://www.w3.org/2005/Atom}entry"}


@pytest.mark.parametrize("fmt", sorted(ITEM))
def test_marks_are_namespaced_elements_not_categories(fmt):
    body = render_feed(INFO, [MARKED, PLAIN], fmt)
    items = ET.fromstring(body).findall(ITEM[fmt])
    assert len(items) == 2
    marked, plain = items
    assert marked.findtext(f"{{{MESH_NAMESPACE}}}republishedBy") == KEY
    assert marked.findtext(f"{{{MESH_NAMESPACE}}}backlog") == "true"
    assert plain.find(f"{{{MESH_NAMESPACE}}}republishedBy") is None
    assert plain.find(f"{{{MESH_NAMESPACE}}}backlog") is None
    assert b"republished-by" not in body
    parsed = parse_feed(body, url=INFO.self_link)
    assert [e.title for e in parsed.entries] == ["post 1", "post 2"]
    # the only categories a reader sees are the entry's own
    assert [c for e in parsed.entries for c in e.categories] == ["news"]


def test_json_feed_marks_live_in_the_feedmesh_extension():
    doc = json.loads(render_feed(INFO, [MARKED, PLAIN], "json1.1"))
    marked, plain = doc["items"]
    assert marked["_feedmesh"] == {"republished_by": KEY, "backlog": True}
    assert marked["tags"] == ["news"] and "_feedmesh" not in plain


def test_a_source_keeps_its_title_and_url_beside_the_marks():
    body = render_feed(INFO, [MARKED], "rss2.0",
                       source_titles=[("Legacy Daily", "http://127.0.0.1:8080/feed.xml")])
    source = ET.fromstring(body).find("channel/item/source")
    assert (source.text, source.get("url")) == ("Legacy Daily", "http://127.0.0.1:8080/feed.xml")
    doc = json.loads(render_feed(INFO, [MARKED], "json1.1", source_titles=[("Legacy Daily",
                                                                              "http://x/f")]))
    assert doc["items"][0]["_feedmesh"] == {"source_title": "Legacy Daily",
                                            "source_url": "http://x/f",
                                            "republished_by": KEY, "backlog": True}
