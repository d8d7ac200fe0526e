"""Who may see and change what: accounts are isolated, API tokens can be revoked, and a private
feed URL is the only key to its feed (guessed, tampered, replaced or deleted ones answer 404)."""

from __future__ import annotations

import base64
import struct

import pytest

from tests.eventually import eventually
from tests.hub.web.conftest import assert_error, subscribe


async def test_an_account_sees_and_changes_only_its_own_subscriptions(hub_env, ann, bob):
    mine = await subscribe(ann, "law internet", name="ann's")
    theirs = await subscribe(bob, "privacy", name="bob's")

    status, body = await bob.call("GET", "/api/subscriptions")
    assert status == 200
    assert [s["id"] for s in body["subscriptions"]] == [theirs["id"]]

    path = f"/api/subscriptions/{mine['id']}"
    missing = "/api/subscriptions/999999"
    for method, payload in (("GET", None), ("PATCH", {"name": "taken"}),
                            ("PATCH", {"new_url": True}), ("DELETE", None)):
        status, body = await bob.call(method, path, payload)
        error = assert_error(status, body, 404, "not_found")
        # Exactly what an id that exists for nobody answers: the probe learns nothing.
        status, other = await bob.call(method, missing, payload)
        assert other["error"]["message"].replace("999999", str(mine["id"])) == error["message"]
    status, body = await bob.call("GET", path + "/entries")
    assert_error(status, body, 404, "not_found")

    status, body = await ann.call("GET", path)
    assert status == 200
    assert body["subscription"]["name"] == "ann's"
    assert body["subscription"]["feed_urls"] == mine["feed_urls"]
    async with hub_env.session.get(mine["feed_urls"]["rss"]) as response:
        assert response.status == 200


async def test_an_account_cannot_unfollow_another_accounts_source(hub_env, ann, bob):
    status, body = await ann.call("POST", "/api/sources",
                                  {"url": hub_env.farm.feed_url(0), "title": "zero"})
    assert status == 201, body
    feed_id = body["source"]["id"]
    status, body = await bob.call("DELETE", f"/api/sources/{feed_id}")
    assert_error(status, body, 404, "not_found")
    status, body = await bob.call("GET", "/api/sources")
    assert body["sources"] == []
    status, body = await ann.call("GET", "/api/sources")
    assert [s["id"] for s in body["sources"]] == [feed_id]


async def test_a_rotated_token_is_revoked(hub_env, ann):
    old = ann.token
    status, body = await ann.call("POST", "/api/accounts/me/token")
    assert status == 200
    new = body["token"]
    assert new != old and new.startswith("fm_")
    ann.token = old
    status, body = await ann.call("GET", "/api/subscriptions")
    error = assert_error(status, body, 401, "unauthorized")
    assert "revoked" in error["message"]
    ann.token = new
    status, body = await ann.call("GET", "/api/accounts/me")
    assert status == 200 and body["account"]["name"] == "ann"


@pytest.mark.parametrize("header", [
    None, "", "Bearer", "Bearer ", "Basic YW5uOnB3", "Token fm_1_abc",
    "Bearer fm_1_wrongsecret", "Bearer fm_424242_abcdef", "Bearer nonsense",
    "Bearer fm_\u00b2_abcdef", "Bearer fm_99999999999999999999999_abcdef",
    "Bearer fm_1_" + "a" * 5000, "Bearer fm_-1_abcdef",
])
async def test_missing_unknown_and_malformed_tokens_get_401(hub_env, ann, header):
    headers = {"Authorization": header} if header is not None else {}
    async with hub_env.session.get(hub_env.base + "/api/subscriptions", headers=headers) as r:
        assert_error(r.status, await r.json(), 401, "unauthorized")


async def test_a_forged_token_for_a_real_account_is_refused(hub_env, ann):
    account_id, secret = ann.token.split("_", 2)[1:]
    flipped = ("A" if secret[0] != "A" else "B") + secret[1:]
    for forged in (f"fm_{account_id}_{flipped}", f"fm_{account_id}_{secret[:-1]}",
                   f"fm_{int(account_id) + 1}_{secret}"):
        async with hub_env.session.get(hub_env.base + "/api/accounts/me",
                                       headers={"Authorization": f"Bearer {forged}"}) as r:
            assert_error(r.status, await r.json(), 401, "unauthorized")


def _feed_token(url: str) -> str:
    return url.rsplit("/", 1)[1].split(".")[0]


def _forge(token: str, sub_id: int) -> str:
    """The same MAC over another subscription's id: what a guesser who read one URL can try."""
    raw = base64.urlsafe_b64decode(token + "==")
    _, generation = struct.unpack(">QI", raw[:12])
    head = struct.pack(">QI", sub_id, generation)
    return base64.urlsafe_b64encode(head + raw[12:]).decode().rstrip("=")


async def _feed_status(env, url: str) -> int:
    async with env.session.get(url) as response:
        if response.status != 200:
            assert_error(response.status, await response.json(), response.status, "not_found")
        return response.status


async def test_guessed_and_tampered_feed_tokens_get_404(hub_env, ann, bob):
    mine = await subscribe(ann, "law")
    theirs = await subscribe(bob, "privacy")
    url = mine["feed_urls"]["atom"]
    token = _feed_token(url)
    assert len(base64.urlsafe_b64decode(token + "==")) - 12 >= 16  # >= 128 bits of MAC
    assert await _feed_status(hub_env, url) == 200

    base = f"{hub_env.base}/f/"
    candidates = [
        _forge(token, theirs["id"]),                        # another subscription's id
        token[:20] + ("A" if token[20] != "A" else "B") + token[21:],  # one character off
        token[:-2],                                         # truncated
        token + "AA",                                       # too long
        "A" * len(token),                                   # all zeros
        "!" * len(token),                                   # not base64 at all
        "\u00e9" * len(token),                              # not ASCII
    ]
    for candidate in candidates:
        assert await _feed_status(hub_env, base + candidate + ".atom") == 404, candidate
        assert await _feed_status(hub_env, base + candidate) == 404, candidate
    assert await _feed_status(hub_env, base + token + ".xml") == 404  # unknown format
    assert await _feed_status(hub_env, theirs["feed_urls"]["rss"]) == 200


async def test_a_deleted_subscriptions_feed_is_gone(hub_env, ann):
    sub = await subscribe(ann, "law")
    assert await _feed_status(hub_env, sub["feed_urls"]["json"]) == 200
    status, _ = await ann.call("DELETE", f"/api/subscriptions/{sub['id']}")
    assert status == 204
    for url in sub["feed_urls"].values():
        assert await _feed_status(hub_env, url) == 404
    status, body = await ann.call("GET", f"/api/subscriptions/{sub['id']}")
    assert_error(status, body, 404, "not_found")


async def test_a_replaced_url_stops_the_old_one(hub_env, ann):
    sub = await subscribe(ann, "law", keep=5)
    status, body = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}", {"new_url": True})
    assert status == 200, body
    changed = body["subscription"]
    assert changed["keep"] == 5 and changed["query"] == "law"
    for kind, old_url in sub["feed_urls"].items():
        assert changed["feed_urls"][kind] != old_url
        assert await _feed_status(hub_env, old_url) == 404
        assert await _feed_status(hub_env, changed["feed_urls"][kind]) == 200
    # Changing something else keeps the (new) URL.
    status, body = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}", {"name": "renamed"})
    assert status == 200
    assert body["subscription"]["feed_urls"] == changed["feed_urls"]


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _same_bytes_other_spelling(token: str) -> list[str]:
    """Other strings that decode to the same 28 bytes: the last character's 4 padding bits set
    differently, and '+'/'/' (standard base64) for '-'/'_' - one feed, one URL."""
    last = B64URL.index(token[-1])
    spellings = [token[:-1] + B64URL[(last & 0b110000) | low] for low in range(16)]
    swapped = token.replace("-", "+").replace("_", "/")
    return [t for t in {*spellings, swapped} if t != token]


async def test_a_feed_answers_at_one_spelling_of_its_token_only(hub_env, ann):
    sub = await subscribe(ann, "law")
    url = sub["feed_urls"]["rss"]
    token = _feed_token(url)
    base = url.rsplit("/", 1)[0] + "/"
    assert await _feed_status(hub_env, url) == 200
    variants = _same_bytes_other_spelling(token)
    assert len(variants) >= 15
    for variant in variants:
        assert base64.urlsafe_b64decode(variant.replace("+", "-").replace("/", "_") + "==") == \
            base64.urlsafe_b64decode(token + "==")
        assert await _feed_status(hub_env, base + variant.replace("/", "%2F") + ".rss") == 404, \
            variant


async def test_a_source_urls_password_is_never_shown(hub_env, ann):
    """It is sent to the publisher (as Basic auth), and shown nowhere: not when added, not in
    the source list or its last error, not in the OPML export."""
    url = hub_env.farm.feed_url(0).replace("http://", "http://ann:hunter2@") + "-missing"
    status, body = await ann.call("POST", "/api/sources", {"url": url})
    assert status == 201, body
    assert "hunter2" not in str(body) and "ann:***@" in body["source"]["url"]

    async def failed() -> dict | None:
        _, listed = await ann.call("GET", "/api/sources")
        mine = listed["sources"][0]
        return mine if mine["last_error"] else None

    source = await eventually(failed, timeout=60.0)
    assert "hunter2" not in str(source), source
    assert "ann:***@" in source["url"] and "ann:***@" in source["last_error"]
    status, opml = await ann.call("GET", "/api/opml")
    assert status == 200 and "hunter2" not in opml and "ann:***@" in opml


async def test_paused_hosts_are_named_to_the_operator_only(hub_env, tmp_path):
    """The hosts of accounts' sources are not public: ``/api/stats`` counts paused hosts for
    anyone, and names them to a holder of ``DATA/operator-token`` (0600)."""
    import os
    import stat

    token_file = tmp_path / "operator-token"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    token = token_file.read_text().strip()
    crawler = hub_env.hub.crawler
    crawler.hosts_paused = lambda: {"private-blog.example": 1e12}  # as a failing host would be
    url = hub_env.base + "/api/stats"
    for headers in ({}, {"Authorization": "Bearer " + token[:-1] + "x"},
                    {"Authorization": token}):
        async with hub_env.session.get(url, headers=headers) as response:
            body = await response.json()
        assert body["hosts_paused"] == 1, headers
        assert "private-blog" not in str(body)
    async with hub_env.session.get(url, headers={"Authorization": f"Bearer {token}"}) as r:
        assert (await r.json())["hosts_paused"] == {"private-blog.example": 1e12}
