"""The parser never raises and never hits its internal-error safety net, whatever the bytes.

Three generators: hypothesis' arbitrary bytes; atheris-style mutation of real feeds (flip,
delete, duplicate and splice byte ranges, insert the tokens that break parsers); and random
feed-shaped XML built from the formats' own vocabulary. Every result must keep the model's
promises: unique keys, capped entries, no executable markup.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedmesh.feeds import ParseLimits, parse_feed
from feedmesh.model import ParsedFeed

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance"
_SEEDS_ON_DISK = [
    "feed-rs-fixtures/rss2/rss_2.0_bbc.xml", "feed-rs-fixtures/atom/atom_xml_base.xml",
    "feed-rs-fixtures/rss1/rss_1.0_debian.xml", "feed-rs-fixtures/jsonfeed/jsonfeed_spec_1.json",
    "feed-rs-fixtures/rss0/rss_0.91_spec_1.xml", "rss-parser-node/input/heise.atom",
    "miniflux-testdata/internal/reader/parser/testdata/encoding_WINDOWS-1251.xml",
]
_BUILTIN_SEEDS = [
    (b"<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel><title>t</title>"
     b"<item><title>a &amp; b</title><link>http://x.test/1</link><guid>1</guid>"
     b"<description>&lt;p&gt;hi&lt;/p&gt;</description><pubDate>Mon, 01 Jan 2024 00:00:00 GMT"
     b"</pubDate></item></channel></rss>"),
    (b"<feed xmlns='http://www.w3.org/2005/Atom' xml:base='http://b.test/'><title>f</title>"
     b"<entry><id>1</id><title type='xhtml'><div xmlns='http://www.w3.org/1999/xhtml'>x</div>"
     b"</title><content type='html'>&lt;b&gt;y&lt;/b&gt;</content><link href='a'/></entry></feed>"),
    (b'{"version":"https://jsonfeed.org/version/1.1","title":"j","items":[{"id":"1",'
     b'"content_html":"<p>x</p>","url":"/1"}]}'),
]
_TOKENS = [b"<", b">", b"&", b"&amp;", b"&nbsp;", b"&#0;", b"&#x110000;", b"]]>", b"<![CDATA[",
           b"<!--", b"-->", b"<!DOCTYPE rss>", b"<!ENTITY a 'b'>", b"\x00", b"\xff\xfe",
           b"\xef\xbb\xbf", b"<?xml version='1.0' encoding='utf-16'?>", b"xml:base='javascript:'",
           b"<script>alert(1)</script>", b"<item>", b"</item>", b"<entry>", b"{", b"}", b'"',
           b"\xc3", b"\xe2\x82", b"\n", b"<rss>", b"<feed xmlns='http://www.w3.org/2005/Atom'>"]
# executable markup: a script element, a script URL in an attribute, an event handler attribute
_DANGER = re.compile(r"<script|<[^>]*\s(?:href|src)\s*=\s*[\"']?\s*(?:javascript|vbscript|data):"
                     r"|<[^>]*\son\w+\s*=", re.IGNORECASE)
LIMITS = ParseLimits(max_entries=50)


def _seeds() -> list[bytes]:
    found = [(CORPUS / name).read_bytes() for name in _SEEDS_ON_DISK if (CORPUS / name).is_file()]
    return found + _BUILTIN_SEEDS


SEEDS = _seeds()


def check(data: bytes) -> ParsedFeed:
    parsed = parse_feed(data, url="http://fuzz.test/feed", limits=LIMITS)
    assert isinstance(parsed, ParsedFeed)
    if parsed.error is not None:
        assert parsed.error.kind != "internal", parsed.error.message
        assert parsed.error.kind in ("not_a_feed", "malformed", "encoding", "forbidden",
                                     "too_large")
    assert len(parsed.entries) <= LIMITS.max_entries
    assert len({entry.key for entry in parsed.entries}) == len(parsed.entries)
    for entry in parsed.entries:
        assert _DANGER.search(entry.summary) is None and _DANGER.search(entry.content) is None
        assert not entry.link.lower().startswith(("javascript:", "data:"))
    return parsed


def mutate(data: bytes, rng: random.Random) -> bytes:
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        if not buffer:
            buffer.extend(rng.choice(_TOKENS))
            continue
        position = rng.randrange(len(buffer))
        operation = rng.randrange(6)
        if operation == 0:
            buffer[position] = rng.randrange(256)
        elif operation == 1:
            del buffer[position:position + rng.randint(1, 64)]
        elif operation == 2:
            buffer[position:position] = rng.choice(_TOKENS)
        elif operation == 3:
            end = min(len(buffer), position + rng.randint(1, 128))
            buffer[position:position] = buffer[position:end]
        elif operation == 4:
            del buffer[position:]
        else:
            other = rng.choice(SEEDS)
            start = rng.randrange(len(other))
            buffer[position:position] = other[start:start + rng.randint(1, 256)]
    return bytes(buffer)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000))
def test_arbitrary_bytes(data: bytes) -> None:
    check(data)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=len(SEEDS) - 1), st.randoms(use_true_random=False))
def test_mutated_real_feeds(index: int, rng: random.Random) -> None:
    check(mutate(SEEDS[index], rng))


@pytest.mark.parametrize("seed", range(4))
def test_mutation_campaign(seed: int) -> None:
    """A fixed-seed campaign, so that a crash found here reproduces exactly."""
    rng = random.Random(seed)
    for _ in range(250):
        data = rng.choice(SEEDS)
        for _ in range(rng.randint(1, 3)):
            data = mutate(data, rng)
        check(data)


_NAMES = st.sampled_from([
    "rss", "channel", "item", "title", "link", "guid", "description", "pubDate", "author",
    "category", "enclosure", "feed", "entry", "id", "content", "summary", "updated", "published",
    "rdf:RDF", "dc:date", "dc:creator", "content:encoded", "media:content", "media:group",
    "skipHours", "hour", "ttl", "image", "url", "div", "b", "p", "a", "source", "name",
])
_ATTRIBUTES = st.sampled_from([
    "", " version='2.0'", " xmlns='http://www.w3.org/2005/Atom'", " type='html'",
    " type='xhtml'", " type='text'", " mode='base64'", " mode='escaped'", " rel='enclosure'",
    " href='//x'", " href='javascript:alert(1)'", " xml:base='../'", " xml:lang=''",
    " isPermaLink='false'", " url='a.mp3' length='-1'", " length='99999999999999999999'",
    " xmlns:dc='http://purl.org/dc/elements/1.1/'", " xmlns:media='http://search.yahoo.com/mrss'",
])
_TEXT = st.sampled_from(["", "x", "&amp;", "&lt;b&gt;bold&lt;/b&gt;", "2024-01-01T00:00:00Z",
                         "Mon, 01 Jan 2024 00:00:00 GMT", "&lt;script&gt;x&lt;/script&gt;",
                         "http://a.test/", "PGI+eDwvYj4=", "\u00e9\u4e2d", " "])


def _element(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda name, attribute, kids: f"<{name}{attribute}>{''.join(kids)}</{name}>",
                     _NAMES, _ATTRIBUTES, st.lists(children, max_size=4))


_XML = st.recursive(_TEXT, _element, max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(_XML, st.sampled_from(["", "<?xml version='1.0'?>",
                              "<?xml version='1.0' encoding='iso-8859-1'?>"]))
def test_feed_shaped_documents(document: str, prolog: str) -> None:
    check((prolog + document).encode("utf-8"))
