"""A WebSub hub's request handling, as data (feedmesh.websub.hub_requests)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from feedmesh.websub.hub_requests import (
    HubRequest,
    HubRequestError,
    LeaseBounds,
    challenge_echoed,
    denial_url,
    parse_hub_request,
    read_form,
    verification_url,
)

BOUNDS = LeaseBounds(default_s=3600, min_s=60, max_s=86400)
BASE = {"hub.mode": "subscribe", "hub.topic": "http://hub.test/f/abc.atom",
        "hub.callback": "http://sub.test/cb?x=1"}


def test_a_subscription_with_unknown_fields_is_read_and_the_lease_clamped():
    form = read_form(b"hub.mode=subscribe&hub.topic=http%3A%2F%2Fhub.test%2Ff%2Fabc.atom"
                     b"&hub.callback=http%3A%2F%2Fsub.test%2Fcb&hub.lease_seconds=999999"
                     b"&hub.secret=s3cret&foo=bar&hub.foo=1")
    request = parse_hub_request(form, BOUNDS)
    assert request == HubRequest(mode="subscribe", topic="http://hub.test/f/abc.atom",
                                 callback="http://sub.test/cb", lease_seconds=86400,
                                 secret="s3cret")
    assert parse_hub_request({**BASE, "hub.lease_seconds": "5"}, BOUNDS).lease_seconds == 60
    assert parse_hub_request(BASE, BOUNDS).lease_seconds == 3600
    unsubscribe = parse_hub_request({**BASE, "hub.mode": "unsubscribe", "hub.secret": "x"},
                                    BOUNDS)
    assert (unsubscribe.lease_seconds, unsubscribe.secret) == (0, "")


@pytest.mark.parametrize(("change", "field", "why"), [
    ({"hub.mode": ""}, "hub.mode", "required"),
    ({"hub.mode": "publish"}, "hub.mode", "subscribe or unsubscribe"),
    ({"hub.topic": ""}, "hub.topic", "required"),
    ({"hub.callback": ""}, "hub.callback", "required"),
    ({"hub.callback": "ftp://sub.test/"}, "hub.callback", "http:// or https://"),
    ({"hub.callback": "/cb"}, "hub.callback", "relative"),
    ({"hub.callback": "http://u:p@sub.test/"}, "hub.callback", "password"),
    ({"hub.callback": "http://sub.test/#x"}, "hub.callback", "fragment"),
    ({"hub.callback": "http://sub.test:99999/"}, "hub.callback", "not a URL"),
    ({"hub.callback": "http://sub.test/a b"}, "hub.callback", "spaces"),
    ({"hub.callback": "http://sub.test/" + "a" * 2000}, "hub.callback", "at most 2000"),
    ({"hub.lease_seconds": "-1"}, "hub.lease_seconds", "whole number"),
    ({"hub.lease_seconds": "1e9"}, "hub.lease_seconds", "whole number"),
    ({"hub.secret": "x" * 200}, "hub.secret", "fewer than 200"),
])
def test_bad_requests_name_the_field_and_why(change, field, why):
    with pytest.raises(HubRequestError, match=why) as caught:
        parse_hub_request({**BASE, **change}, BOUNDS)
    assert caught.value.field == field


def test_forms_that_are_not_utf8_or_too_long_are_refused():
    with pytest.raises(HubRequestError, match="not UTF-8"):
        read_form(b"hub.mode=\xff")
    with pytest.raises(HubRequestError, match="at most 50 fields"):
        read_form(b"&".join(b"a%d=1" % n for n in range(60)))
    assert read_form(b"a=1&a=2&b=")["a"] == "1"


def test_verification_keeps_the_callbacks_query_and_asks_for_the_challenge():
    request = parse_hub_request(BASE, BOUNDS)
    url = verification_url(request, "ch4llenge")
    parts = urlsplit(url)
    assert (parts.netloc, parts.path) == ("sub.test", "/cb")
    assert parse_qs(parts.query) == {"x": ["1"], "hub.mode": ["subscribe"],
                                     "hub.topic": [BASE["hub.topic"]],
                                     "hub.challenge": ["ch4llenge"],
                                     "hub.lease_seconds": ["3600"]}
    assert "hub.lease_seconds" not in verification_url(
        parse_hub_request({**BASE, "hub.mode": "unsubscribe"}, BOUNDS), "c")


def test_a_denial_names_the_topic_and_why_and_keeps_the_callbacks_query():
    url = denial_url(BASE["hub.callback"], BASE["hub.topic"], "why " * 100)
    parts = urlsplit(url)
    assert (parts.netloc, parts.path) == ("sub.test", "/cb")
    query = parse_qs(parts.query)
    assert query["x"] == ["1"] and query["hub.mode"] == ["denied"]
    assert query["hub.topic"] == [BASE["hub.topic"]]
    assert query["hub.reason"] == [("why " * 100)[:200]]
    assert "hub.challenge" not in query


def test_only_an_exact_echo_with_a_2xx_confirms():
    assert challenge_echoed(200, b"abc", "abc")
    assert challenge_echoed(204 - 4, b"abc\n", "abc")
    assert not challenge_echoed(200, b"abcd", "abc")
    assert not challenge_echoed(200, b"", "abc")
    assert not challenge_echoed(404, b"abc", "abc")


def test_lease_bounds_must_be_ordered():
    with pytest.raises(ValueError, match="min_s"):
        LeaseBounds(default_s=10, min_s=60, max_s=100)
