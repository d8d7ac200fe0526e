"""A new subscription starts full: its feed holds at once the newest matches among the entries
already stored (what the preview shows), not nothing until new articles arrive; they are stored
like any match, so a restart keeps them."""

from __future__ import annotations

from tests.hub.web.conftest import FARM_QUERY, settle, subscribe


async def test_a_new_subscription_starts_with_the_newest_stored_matches(hub_env, ann):
    await hub_env.add_farm_sources(ann)
    await settle(hub_env)  # the backlog is stored; a later subscription saw none of it arrive
    status, preview = await ann.call("POST", "/api/preview", {"query": FARM_QUERY})
    assert status == 200 and preview["matched"] >= 3, preview
    sub = await subscribe(ann, FARM_QUERY, keep=3)
    status, body = await ann.call("GET", f"/api/subscriptions/{sub['id']}/entries")
    held = body["entries"]
    assert len(held) == 3  # full at once, without waiting for the farm to post
    newest = sorted(preview["matches"], key=lambda m: m["first_seen_at"], reverse=True)
    assert {e["first_seen_at"] for e in held} <= {m["first_seen_at"] for m in newest}
    status, feed = await ann.call("GET", f"/f/{sub['feed_urls']['rss'].rsplit('/', 1)[1]}")
    assert status == 200 and feed.count("<item>") == 3


async def test_the_preview_says_why_each_entry_matched(hub_env, ann):
    await hub_env.add_farm_sources(ann)
    await settle(hub_env)
    status, preview = await ann.call("POST", "/api/preview", {"query": FARM_QUERY})
    assert status == 200 and preview["matches"]
    visible = 0
    for match in preview["matches"]:
        assert match["terms"] and set(match["terms"]) <= {"government", "music", "water"}
        assert "<" not in match["summary"] and len(match["summary"]) <= 302  # plain, short
        shown = f"{match['title']} {match['summary']}".lower()
        visible += any(term in shown for term in match["terms"])
    # The excerpt is taken around the first term it holds (a term only in the categories or an
    # author's name is the rare one not in view).
    assert visible >= 0.9 * len(preview["matches"]), (visible, len(preview["matches"]))
