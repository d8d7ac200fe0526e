"""The SCRIBE-RSS ``<subscribe>`` element: written for our feeds, read from others' (issue 14).

Round trips in every format that carries it, then a table of documents, well-formed and not:
each says what the parser must read and which warning it must give. A bad element never raises
and never spoils the rest of the feed."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from feedmesh.feeds import parse_feed
from feedmesh.feeds.render import render_feed
from feedmesh.model import Entry, FeedInfo, MeshSubscribe

KEY = base64.b64encode(bytes(range(32))).decode()
FINGERPRINT = "sha256:" + hashlib.sha256(bytes(range(32))).hexdigest()
NS = "https://feedmesh.org/ns/scribe-rss/1.0"
URL = "http://127.0.4.1:8000/feed.xml"

STATEMENT = base64.b64encode(bytes(range(200))).decode()   # the form only: checked by the mesh
STATEMENT2 = base64.b64encode(bytes(range(50, 250))).decode()
ENTRY = Entry(key="e1", guid="e1", title="First", link="http://127.0.4.1:8000/1")


@pytest.mark.parametrize("fmt", ["rss2.0", "atom1.0", "json1.0", "json1.1"])
@pytest.mark.parametrize("subscribe", [
    MeshSubscribe(group=URL, public_key=KEY, bootstrap=("127.0.4.1:7000", "127.0.4.2:7000")),
    MeshSubscribe(key_url="http://127.0.4.1:8000/key", fingerprint=FINGERPRINT),
    MeshSubscribe(group=URL, public_key=KEY, republication=True),
    MeshSubscribe(group=URL, public_key=KEY, rotations=(STATEMENT, STATEMENT2)),
], ids=["inline", "uri-fingerprint", "republication", "rotations"])
def test_round_trip(fmt: str, subscribe: MeshSubscribe) -> None:
    feed = FeedInfo(title="Ours", link="http://127.0.4.1:8000/", self_link=URL, subscribe=subscribe)
    parsed = parse_feed(render_feed(feed, [ENTRY], fmt), url=URL)
    assert parsed.error is None and parsed.warnings == ()
    assert parsed.feed.subscribe == subscribe
    assert [e.title for e in parsed.entries] == ["First"]


@pytest.mark.parametrize("fmt", ["rss2.0", "atom1.0", "json1.1"])
def test_no_element_without_a_key(fmt: str) -> None:
    body = render_feed(FeedInfo(title="Plain", self_link=URL), [ENTRY], fmt)
    assert b"subscribe" not in body
    assert parse_feed(body, url=URL).feed.subscribe is None


def rss(element: str) -> bytes:
    return (f'<?xml version="1.0"?><rss version="2.0" xmlns:fm="{NS}"><channel><title>T</title>'
            f"<link>http://127.0.4.1/</link>{element}<item><title>kept</title></item>"
            "</channel></rss>").encode()


def atom(element: str) -> bytes:
    return (f'<feed xmlns="http://www.w3.org/2005/Atom" xmlns:fm="{NS}"><title>T</title>'
            f"<id>urn:t</id>{element}<entry><id>urn:1</id><title>kept</title></entry></feed>").encode()


def jsonfeed(subscribe: object) -> bytes:
    return json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "T",
                       "_feedmesh": {"subscribe": subscribe},
                       "items": [{"id": "1", "title": "kept"}]}).encode()


# (name, document, expected subscribe, words the warning must contain or None)
CASES = [
    ("rss-inline", rss(f'<fm:subscribe group="{URL}"><fm:publicKey>{KEY}</fm:publicKey>'
                       "<fm:bootstrap>127.0.4.9:7001</fm:bootstrap></fm:subscribe>"),
     MeshSubscribe(group=URL, public_key=KEY, bootstrap=("127.0.4.9:7001",)), None),
    ("rss-other-prefix", rss(f'<s:subscribe xmlns:s="{NS}"><s:publicKey algorithm="Ed25519">'
                             f"{KEY}</s:publicKey></s:subscribe>"),
     MeshSubscribe(public_key=KEY), None),
    ("rss-uri", rss(f'<fm:subscribe><fm:publicKey href="https://k.example/key" '
                    f'fingerprint="{FINGERPRINT.upper().replace("SHA256", "sha256")}"/>'
                    "</fm:subscribe>"),
     MeshSubscribe(key_url="https://k.example/key", fingerprint=FINGERPRINT), None),
    ("rss-no-key", rss("<fm:subscribe><fm:bootstrap>127.0.4.1:1</fm:bootstrap></fm:subscribe>"),
     None, "no <publicKey>"),
    ("rss-empty-key", rss("<fm:subscribe><fm:publicKey/></fm:subscribe>"), None, "is empty"),
    ("rss-not-base64", rss("<fm:subscribe><fm:publicKey>not base64!</fm:publicKey>"
                           "</fm:subscribe>"), None, "not base64"),
    ("rss-short-key", rss("<fm:subscribe><fm:publicKey>AAAA</fm:publicKey></fm:subscribe>"),
     None, "3 bytes"),
    ("rss-rsa", rss(f'<fm:subscribe><fm:publicKey algorithm="rsa">{KEY}</fm:publicKey>'
                    "</fm:subscribe>"), None, "not ed25519"),
    ("rss-uri-no-fingerprint", rss('<fm:subscribe><fm:publicKey href="https://k.example/key"/>'
                                   "</fm:subscribe>"), None, "fingerprint"),
    ("rss-uri-ftp", rss(f'<fm:subscribe><fm:publicKey href="ftp://k/key" '
                        f'fingerprint="{FINGERPRINT}"/></fm:subscribe>'), None, "not http(s)"),
    ("rss-bad-bootstrap", rss(f"<fm:subscribe><fm:publicKey>{KEY}</fm:publicKey>"
                              "<fm:bootstrap>nowhere</fm:bootstrap>"
                              "<fm:bootstrap>127.0.4.3:99999</fm:bootstrap>"
                              "<fm:bootstrap>127.0.4.3:7000</fm:bootstrap></fm:subscribe>"),
     MeshSubscribe(public_key=KEY, bootstrap=("127.0.4.3:7000",)), "'nowhere' is not host:port"),
    ("rss-bad-group", rss(f'<fm:subscribe group="javascript:x"><fm:publicKey>{KEY}'
                          "</fm:publicKey></fm:subscribe>"),
     MeshSubscribe(public_key=KEY), "not an http(s) URL"),
    ("atom-inline", atom(f'<fm:subscribe republication="true"><fm:publicKey>{KEY}</fm:publicKey>'
                         "</fm:subscribe>"),
     MeshSubscribe(public_key=KEY, republication=True), None),
    ("atom-not-base64", atom("<fm:subscribe><fm:publicKey>%%%</fm:publicKey></fm:subscribe>"),
     None, "not base64"),
    ("json-inline", jsonfeed({"public_key": KEY, "bootstrap": ["127.0.4.1:7000"]}),
     MeshSubscribe(public_key=KEY, bootstrap=("127.0.4.1:7000",)), None),
    ("json-not-object", jsonfeed("yes please"), None, "not an object"),
    ("json-key-number", jsonfeed({"public_key": 42}), None, "is empty"),
    ("json-bootstrap-not-list", jsonfeed({"public_key": KEY, "bootstrap": 7}),
     MeshSubscribe(public_key=KEY), "not host:port"),
]


@pytest.mark.parametrize(("document", "expected", "warning"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_reading(document: bytes, expected: MeshSubscribe | None, warning: str | None) -> None:
    parsed = parse_feed(document, url=URL)
    assert parsed.error is None, parsed.error        # the feed itself is fine
    assert [e.title for e in parsed.entries] == ["kept"]
    assert parsed.feed.subscribe == expected
    if warning is None:
        assert parsed.warnings == ()
    else:
        assert any(warning in w.message for w in parsed.warnings), parsed.warnings
        assert all(w.kind == "invalid" for w in parsed.warnings)


@pytest.mark.parametrize("fmt", ["rss2.0", "json1.1"])
def test_a_bad_rotation_drops_the_rotations_and_keeps_the_key(fmt: str) -> None:
    subscribe = MeshSubscribe(group=URL, public_key=KEY, rotations=(STATEMENT, "not base64!"))
    feed = FeedInfo(title="Ours", self_link=URL, subscribe=subscribe)
    parsed = parse_feed(render_feed(feed, [ENTRY], fmt), url=URL)
    assert parsed.feed.subscribe == MeshSubscribe(group=URL, public_key=KEY)
    assert [w.message for w in parsed.warnings] == [
        ("<subscribe> rotation 2 is not a base64 statement (or one too many, over 64): the "
         "rotations are ignored")]
