"""The pure model: determinism, caching that never changes an answer, deltas, config checking."""

from __future__ import annotations

import json

import pytest
from lxml import etree

from feedmesh.farm import FarmConfig, FarmConfigError, FarmModel, Fault
from feedmesh.farm.catalog import FeedCatalog
from feedmesh.farm.documents import apply_content_fault, parse_etag_version
from feedmesh.farm.faults import DEFAULT_FAULT_MIX, FaultSpecError, parse_fault, parse_fault_mix
from feedmesh.feeds.render import FORMATS

T0 = 1_760_000_000.0
BASE = ["http://127.0.0.1:8080"]


def model(**fields) -> FarmModel:
    fields.setdefault("feeds", 50)
    fields.setdefault("faults", "none")
    return FarmModel(FarmConfig(**fields), BASE * fields.get("hosts", 1))


def test_same_config_and_time_give_the_same_bytes_in_any_order():
    a, b = model(seed=3), model(seed=3)
    forward = [a.document(i, T0).body for i in range(50)]
    backward = [b.document(i, T0).body for i in reversed(range(50))][::-1]
    assert forward == backward
    assert model(seed=4).document(0, T0).body != forward[0]


def test_a_feed_does_not_depend_on_the_farm_size():
    small, large = model(feeds=10, seed=5), model(feeds=5000, seed=5)
    for feed_id in range(10):
        assert small.spec(feed_id) == large.spec(feed_id)
        assert small.document(feed_id, T0).body == large.document(feed_id, T0).body


def test_cached_documents_equal_fresh_renders_as_time_passes():
    cached = model(seed=6, feeds=30)
    t = T0
    for step in range(40):
        t += 1800 * (1 + step % 5)
        for feed_id in range(30):
            doc = cached.document(feed_id, t)
            assert doc.body == cached.render(feed_id, t).body
            assert doc.valid_from <= t < doc.valid_until


def test_documents_change_exactly_when_a_post_arrives():
    m = model(seed=8)
    feed = max(range(50), key=lambda i: m.spec(i).rate_per_day)
    doc = m.document(feed, T0)
    assert m.document(feed, doc.valid_until - 1) is doc
    later = m.document(feed, doc.valid_until)
    assert later.etag != doc.etag
    arrived = m.posts(feed, doc.valid_until - 1, doc.valid_until)
    assert arrived and later.posts[0] == arrived[-1]


def test_document_lists_the_latest_posts_within_the_cap():
    m = model(seed=9)
    for feed_id in range(50):
        spec = m.spec(feed_id)
        doc = m.document(feed_id, T0)
        assert len(doc.posts) <= spec.entries_cap
        truth = m.posts(feed_id, T0 - m.lookback_s, T0)
        assert doc.posts == truth[::-1][:spec.entries_cap]


def test_etag_encodes_the_version():
    m = model(seed=2)
    doc = m.document(3, T0)
    assert parse_etag_version(doc.etag, 2, 3) == doc.newest
    assert parse_etag_version("W/" + doc.etag, 2, 3) == doc.newest
    assert parse_etag_version(doc.etag, 2, 4) is None  # another feed's
    assert parse_etag_version('"garbage"', 2, 3) is None


def test_delta_renders_only_newer_entries():
    m = model(seed=12)
    feed = max(range(50), key=lambda i: m.spec(i).rate_per_day)
    old = m.document(feed, T0)
    new = m.document(feed, old.valid_until + 3 * 3600)
    newer = [p for p in new.posts if p.order > old.newest]
    assert newer
    delta = m.delta(new, old.newest)
    assert delta is not None and len(delta) < len(new.body)
    for post in newer:
        assert post.key.encode() in delta
    assert m.delta(new, new.newest) is None  # nothing newer
    assert m.delta(new, (0, 0, -1)) is None  # older than the window: no complete delta


@pytest.mark.parametrize("fmt", FORMATS)
def test_malformed_fault_breaks_every_format(fmt):
    text = model(format_mix={fmt: 1.0}).document(0, T0).body.decode()
    broken = apply_content_fault(Fault.MALFORMED, fmt, text)
    if fmt.startswith("json"):
        with pytest.raises(json.JSONDecodeError):
            json.loads(broken)
    else:
        with pytest.raises(etree.XMLSyntaxError):
            etree.fromstring(broken)


@pytest.mark.parametrize("fmt", ["atom1.0", "json1.1"])
def test_utf16_fault_in_other_formats(fmt):
    text = model(format_mix={fmt: 1.0}).document(0, T0).body.decode()
    body = apply_content_fault(Fault.UTF16, fmt, text)
    assert body[:2] == b"\xff\xfe" and body.decode("utf-16").startswith(text[:5])


def test_catalog_mixes_follow_their_shares():
    catalog = FeedCatalog(FarmConfig(feeds=20_000, seed=1, faults="none"))
    formats = [catalog._formats[i] for i in catalog.formats]
    assert 0.45 < formats.count("rss2.0") / 20_000 < 0.55
    assert all(formats.count(f) > 0 for f in FORMATS)
    specs = [catalog.spec(i) for i in range(2000)]
    validators = {v: sum(s.validators == v for s in specs) / 2000 for v in
                  ("both", "etag", "last_modified", "none")}
    assert validators["both"] > 0.35 and min(validators.values()) > 0.1
    assert 0.05 < sum(s.delta for s in specs) / 2000 < 0.25
    assert 0.3 < sum(s.compression != "none" for s in specs) / 2000 < 0.7


def test_hosts_spread_round_robin():
    m = model(hosts=4, feeds=12)
    assert [m.spec(i).host for i in range(5)] == ["127.0.1.1", "127.0.1.2", "127.0.1.3",
                                                  "127.0.1.4", "127.0.1.1"]


def test_fault_spec_parsing():
    assert parse_fault_mix("none") == {}
    assert parse_fault_mix("default") == dict(DEFAULT_FAULT_MIX)
    mix = parse_fault_mix("default,flood=0.5")
    assert mix[Fault.FLOOD] == 0.5 and mix[Fault.NOT_FOUND] == DEFAULT_FAULT_MIX[Fault.NOT_FOUND]
    assert parse_fault_mix("500=0.1,404=0.2") == {Fault.HTTP_500: 0.1, Fault.NOT_FOUND: 0.2}
    assert parse_fault("slowloris") is Fault.SLOW_BODY
    for bad, message in [("bogus=0.1", "unknown fault 'bogus'"), ("timeout", "KIND=SHARE"),
                         ("timeout=x", "not a number"), ("timeout=2", "within"),
                         ("timeout=0.6,http_500=0.6", "add up"), ("http_500=0.1,none", "start")]:
        with pytest.raises(FaultSpecError, match=message):
            parse_fault_mix(bad)


def test_config_is_checked():
    for fields, message in [({"feeds": -1}, "feeds"), ({"speed": 0}, "speed"),
                            ({"hosts": 0}, "hosts"), ({"faults": "nope=1"}, "unknown fault"),
                            ({"fault_overrides": {5: "http_500"}, "feeds": 3}, "no such feed"),
                            ({"format_mix": {"rss9": 1.0}}, "format_mix"),
                            ({"delta_share": 2.0}, "delta_share")]:
        with pytest.raises(FarmConfigError, match=message):
            FarmConfig(**fields)


def test_a_hundred_thousand_feeds_cost_nothing_until_asked():
    # Nothing is computed per feed until asked; the time this takes is benchmarks/farm.py's
    # startup_s_100k_in_process.
    m = FarmModel(FarmConfig(feeds=100_000, seed=1), BASE)
    assert m.catalog._specs.count(None) == 100_000 and not m._docs
