"""Entry identity: the key cascade, uniqueness within a document, stability across fetches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from feedmesh.feeds import content_hash, entry_key, parse_feed
from feedmesh.feeds.identity import unique_keys
from feedmesh.model import Entry


def rss(items: list[str]) -> bytes:
    return ("<rss version='2.0'><channel><title>t</title>" + "".join(items)
            + "</channel></rss>").encode()


def item(guid: str | None = None, link: str | None = None, title: str = "T",
         body: str = "B") -> str:
    parts = [f"<title>{title}</title>", f"<description>{body}</description>"]
    if guid is not None:
        parts.append(f"<guid isPermaLink='false'>{guid}</guid>")
    if link is not None:
        parts.append(f"<link>{link}</link>")
    return "<item>" + "".join(parts) + "</item>"


def test_cascade_guid_then_link_then_hash() -> None:
    assert entry_key("  urn:x:1 \n", "http://a/1", "t", "b") == "urn:x:1"
    assert entry_key("", "http://a/1", "t", "b") == "http://a/1"
    hashed = entry_key("", "", "Title", "Body")
    assert hashed.startswith("hash:") and len(hashed) == 5 + 32
    assert entry_key("", "", "Title", "  Body ") == hashed  # whitespace does not matter
    assert entry_key("", "", "Title", "Other body") != hashed


def test_content_hash_follows_what_a_reader_sees() -> None:
    base = content_hash("Title", "http://a/1", "<p>Sum</p>", "<p>Body</p>")
    assert content_hash("Title ", "http://a/1", "<p>Sum</p>", "<p>Body</p>\n") == base
    assert content_hash("Title!", "http://a/1", "<p>Sum</p>", "<p>Body</p>") != base
    assert content_hash("Title", "http://a/2", "<p>Sum</p>", "<p>Body</p>") != base
    assert content_hash("Title", "http://a/1", "<p>Sum</p>", "<p>Body 2</p>") != base
    # fields do not bleed into each other
    assert content_hash("ab", "", "", "") != content_hash("a", "b", "", "")


def test_keys_from_a_document() -> None:
    parsed = parse_feed(rss([item(guid="g1", link="http://a/1"), item(link="http://a/2"),
                             item(title="only text", body="no id")]))
    keys = [entry.key for entry in parsed.entries]
    assert keys[:2] == ["g1", "http://a/2"]
    assert keys[2].startswith("hash:")


def test_duplicate_guids_are_told_apart_by_link() -> None:
    parsed = parse_feed(rss([item(guid="same", link="http://a/1", title="one"),
                             item(guid="same", link="http://a/2", title="two")]))
    assert [e.key for e in parsed.entries] == ["same http://a/1", "same http://a/2"]


def test_duplicate_guids_and_links_are_told_apart_by_content() -> None:
    parsed = parse_feed(rss([item(guid="same", link="http://a/1", title="one"),
                             item(guid="same", link="http://a/1", title="two")]))
    first, second = parsed.entries
    assert first.key == "same #" + first.content_hash
    assert second.key == "same #" + second.content_hash
    assert first.key != second.key


def test_exact_copies_are_kept_and_numbered() -> None:
    parsed = parse_feed(rss([item(guid="same", link="http://a/1")] * 3))
    keys = [e.key for e in parsed.entries]
    assert len(set(keys)) == 3
    assert keys[1] == keys[0] + " #2" and keys[2] == keys[0] + " #3"


def test_disambiguation_does_not_depend_on_order() -> None:
    items = [item(guid="same", link="http://a/1", title="one"),
             item(guid="same", link="http://a/2", title="two"), item(guid="other")]
    forward = {e.title: e.key for e in parse_feed(rss(items)).entries}
    backward = {e.title: e.key for e in parse_feed(rss(items[::-1])).entries}
    assert forward == backward


def test_same_entry_keeps_its_key_across_fetches() -> None:
    first = parse_feed(rss([item(guid="a"), item(link="http://x/b"), item(title="c", body="c")]))
    # next fetch: a new entry on top, one edited, order shifted
    second = parse_feed(rss([item(guid="new"), item(guid="a", body="edited"),
                             item(link="http://x/b"), item(title="c", body="c")]))
    before = {e.key: e.content_hash for e in first.entries}
    after = {e.key: e.content_hash for e in second.entries}
    assert set(before) <= set(after)
    assert after["a"] != before["a"]  # edited: same key, new content hash
    assert after["http://x/b"] == before["http://x/b"]


def test_changing_guids_keep_the_content_hash() -> None:
    # A feed that puts a session id in every guid: keys change each fetch, content hashes do
    # not, which is what the store's per-feed content-hash rule uses to drop them.
    fetch_one = parse_feed(rss([item(guid=f"post-1?session={n}", title="Same post")
                                for n in (1,)]))
    fetch_two = parse_feed(rss([item(guid=f"post-1?session={n}", title="Same post")
                                for n in (2,)]))
    assert fetch_one.entries[0].key != fetch_two.entries[0].key
    assert fetch_one.entries[0].content_hash == fetch_two.entries[0].content_hash


_keys = st.sampled_from(["a", "b", "a http://x/1", "hash:1"])
_links = st.sampled_from(["", "http://x/1", "http://x/2"])
_titles = st.sampled_from(["", "t1", "t2"])


@given(st.lists(st.tuples(_keys, _links, _titles), max_size=12))
def test_keys_are_always_unique_and_deterministic(rows: list[tuple[str, str, str]]) -> None:
    entries = [Entry(key=key, link=link, title=title,
                     content_hash=content_hash(title, link, "", "")) for key, link, title in rows]
    result = unique_keys(entries)
    assert len(result) == len(entries)
    assert len({entry.key for entry in result}) == len(result)
    assert unique_keys(entries) == result
    for original, final in zip(entries, result, strict=True):
        assert final.key.startswith(original.key)
