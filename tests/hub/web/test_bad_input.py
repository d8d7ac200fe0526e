"""Bad requests get precise 4xx answers in the one JSON error shape, never a 500 or HTML.

Each case is a request a careless or hostile client sends; the expected status and ``code`` are
what a client branches on, and the message must say what was wrong.
"""

from __future__ import annotations

import pytest

from tests.hub.web.conftest import ROOMY_LIMITS, assert_error, subscribe


async def test_malformed_json_names_the_position(hub_env, ann):
    status, body = await ann.call("POST", "/api/subscriptions", data=b'{"query": "law",}',
                                  headers={"Content-Type": "application/json"})
    error = assert_error(status, body, 400, "malformed_json")
    assert error["position"] == 16
    assert "not valid JSON" in error["message"]


@pytest.mark.parametrize("raw, kind", [(b"[1, 2]", "list"), (b'"law"', "str"), (b"42", "int")])
async def test_json_that_is_not_an_object(hub_env, ann, raw, kind):
    status, body = await ann.call("POST", "/api/subscriptions", data=raw,
                                  headers={"Content-Type": "application/json"})
    error = assert_error(status, body, 400, "malformed_json")
    assert kind in error["message"]


@pytest.mark.parametrize("raw, why", [
    (b"[" * 20_000 + b"]" * 20_000, "nested too deeply"),
    (b'{"query": "law", "keep": NaN}', "NaN is not a JSON number"),
    (b'{"query": "law", "keep": -Infinity}', "-Infinity is not a JSON number"),
    (b'{"query": "law", "query": "privacy"}', "the key 'query' appears twice"),
])
async def test_json_a_parser_could_read_two_ways_is_refused(hub_env, ann, raw, why):
    status, body = await ann.call("POST", "/api/subscriptions", data=raw,
                                  headers={"Content-Type": "application/json"})
    assert why in assert_error(status, body, 400, "malformed_json")["message"]


async def test_a_deeply_nested_sign_up_is_a_400_not_a_500(hub_env):
    """Unauthenticated: the first request an attacker can send."""
    status, body = await hub_env.anonymous.call(
        "POST", "/api/accounts", data=b'{"name": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        headers={"Content-Type": "application/json"})
    assert "nested too deeply" in assert_error(status, body, 400, "malformed_json")["message"]


async def test_body_that_is_not_utf8(hub_env, ann):
    status, body = await ann.call("POST", "/api/preview", data=b'{"query": "\xff\xfe"}',
                                  headers={"Content-Type": "application/json"})
    assert_error(status, body, 400, "malformed_json")


async def test_wrong_content_type(hub_env, ann):
    status, body = await ann.call("POST", "/api/subscriptions", data=b"query=law",
                                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    error = assert_error(status, body, 415, "unsupported_media_type")
    assert "application/x-www-form-urlencoded" in error["message"]


async def test_json_with_charset_parameter_is_accepted(hub_env, ann):
    status, body = await ann.call(
        "POST", "/api/subscriptions", data=b'{"query": "law internet"}',
        headers={"Content-Type": "application/json; charset=utf-8"})
    assert status == 201, body


async def test_sign_up_without_a_body_or_content_type(hub_env):
    """``curl -X POST /api/accounts``: the name is optional, so is the body (OpenAPI says so)."""
    async with hub_env.session.post(hub_env.base + "/api/accounts") as response:
        body = await response.json()
        assert response.status == 201, body
        assert body["token"].startswith("fm_")


async def test_body_too_large_for_json(hub_env, ann):
    limit = ROOMY_LIMITS.max_body_bytes
    query = "law " * (limit // 4 + 10)
    status, body = await ann.call("POST", "/api/subscriptions", {"query": query})
    error = assert_error(status, body, 413, "body_too_large")
    assert error["limit"] == limit


async def test_body_over_the_server_cap(hub_env, ann):
    """Over the transport cap (the OPML size) aiohttp itself refuses; still our shape."""
    status, body = await ann.call("POST", "/api/preview", data=b"x" * (3 * 1024 * 1024),
                                  headers={"Content-Type": "application/json"})
    error = assert_error(status, body, 413, "body_too_large")
    assert error["limit"] == ROOMY_LIMITS.max_opml_bytes


async def test_query_too_long(hub_env, ann):
    status, body = await ann.call("POST", "/api/subscriptions", {"query": "law " * 300})
    error = assert_error(status, body, 400, "invalid_query")
    assert error["position"] == 1000
    assert "too long" in error["message"]


async def test_query_with_a_syntax_error_is_positioned(hub_env, ann):
    status, body = await ann.call("POST", "/api/preview", {"query": "law AND (internet"})
    error = assert_error(status, body, 400, "invalid_query")
    assert error["position"] == 8
    assert "')'" in error["hint"]


@pytest.mark.parametrize("query", [None, "", "   ", 42, ["law"]])
async def test_missing_or_non_text_query(hub_env, ann, query):
    status, body = await ann.call("POST", "/api/subscriptions", {"query": query})
    error = assert_error(status, body, 400, "invalid_query")
    assert "query is required" in error["message"]


@pytest.mark.parametrize("keep", [0, -1, 101, 2.5, "10", True, None])
async def test_invalid_keep(hub_env, ann, keep):
    status, body = await ann.call("POST", "/api/subscriptions", {"query": "law", "keep": keep})
    error = assert_error(status, body, 400, "invalid_keep")
    assert "1 to 100" in error["message"]


async def test_invalid_keep_on_change(hub_env, ann):
    sub = await subscribe(ann, "law")
    status, body = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}", {"keep": 1000})
    assert_error(status, body, 400, "invalid_keep")
    status, body = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}", {"new_url": "yes"})
    assert_error(status, body, 400, "invalid_new_url")


@pytest.mark.parametrize("name", [42, "x" * 201])
async def test_invalid_subscription_name(hub_env, ann, name):
    status, body = await ann.call("POST", "/api/subscriptions", {"query": "law", "name": name})
    assert_error(status, body, 400, "invalid_name")


@pytest.mark.parametrize("url", ["ftp://example.com/feed", "javascript:alert(1)", "", None,
                                 "http://" + "a" * 2000])
async def test_invalid_source_url(hub_env, ann, url):
    status, body = await ann.call("POST", "/api/sources", {"url": url})
    assert_error(status, body, 400, "invalid_url")


@pytest.mark.parametrize("method, path", [
    ("GET", "/api/nothing-here"), ("POST", "/nope"), ("GET", "/f"),
    ("DELETE", "/api"), ("GET", "/static/missing.js")])
async def test_unknown_route(hub_env, ann, method, path):
    status, body = await ann.call(method, path)
    error = assert_error(status, body, 404, "not_found")
    assert path in error["message"]


@pytest.mark.parametrize("method, path, allowed", [
    ("PUT", "/api/subscriptions", {"GET", "POST"}),
    ("GET", "/api/preview", {"POST"}),
    ("DELETE", "/api/accounts", {"POST"}),
    ("POST", "/f/sometoken.rss", {"GET", "HEAD"}),
    ("GET", "/api/sources/1", {"DELETE"}),
])
async def test_wrong_method(hub_env, ann, method, path, allowed):
    async with hub_env.session.request(method, hub_env.base + path,
                                       headers={"Authorization": f"Bearer {ann.token}"}) as r:
        body = await r.json()
        error = assert_error(r.status, body, 405, "method_not_allowed")
        assert method in error["message"] and path in error["message"]
        assert set(r.headers["Allow"].split(",")) >= allowed
        assert r.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("raw_id", ["\u00b2", "\u0663", "99999999999999999999999", "-1", "1.0",
                                    "0x10"])
async def test_odd_ids_are_not_found(hub_env, ann, raw_id):
    """Unicode digits and numbers SQLite cannot hold are ids nobody has: 404, not 500."""
    await subscribe(ann, "law")
    for method in ("GET", "PATCH", "DELETE"):
        status, body = await ann.call(method, f"/api/subscriptions/{raw_id}", {})
        assert_error(status, body, 404, "not_found")
    status, body = await ann.call("GET", f"/api/subscriptions/{raw_id}/entries")
    assert_error(status, body, 404, "not_found")
    status, body = await ann.call("DELETE", f"/api/sources/{raw_id}")
    assert_error(status, body, 404, "not_found")


async def test_odd_if_modified_since_dates(hub_env, ann):
    """An unparsable date is ignored (200); RFC 5322's "-0000" zone means UTC (304), not a 500."""
    sub = await subscribe(ann, "law")
    url = sub["feed_urls"]["rss"]
    for since, expected in (("yesterday", 200), ("Mon, 99 Foo 1999 99:99:99 GMT", 200),
                            ("Tue, 01 Jan 2030 00:00:00 -0000", 304),
                            ("Tue, 01 Jan 2030 00:00:00 GMT", 304)):
        async with hub_env.session.get(url, headers={"If-Modified-Since": since}) as response:
            assert response.status == expected, (since, response.status, await response.text())


async def test_the_interface_files_are_served(hub_env):
    for path, kind in (("/", "text/html"), ("/static/app.js", "text/javascript"),
                       ("/static/style.css", "text/css")):
        async with hub_env.session.get(hub_env.base + path) as response:
            assert response.status == 200, path
            assert response.content_type == kind
            assert len(await response.read()) > 500
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            assert "script-src 'self'" in response.headers["Content-Security-Policy"]


@pytest.mark.parametrize("title", [42, ["a"], {"a": 1}, "t" * 201])
async def test_invalid_source_title(hub_env, ann, title):
    status, body = await ann.call("POST", "/api/sources",
                                  {"url": "http://127.0.0.1:9/feed", "title": title})
    assert_error(status, body, 400, "invalid_title")
    status, body = await ann.call("GET", "/api/sources")
    assert body["sources"] == []
