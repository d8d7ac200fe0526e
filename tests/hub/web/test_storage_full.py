"""A full disk: writes answer 503 storage_full (one log line, no traceback), reads go on, and
writes work again once there is room. SQLite's page limit (``max_page_count``) makes a database
full exactly as a full disk does (SQLITE_FULL)."""

from __future__ import annotations

import logging

from tests.hub.web.conftest import assert_error, subscribe


def _fill(store) -> None:
    """No page more for ``store``'s database: the next write that needs one fails as on a full
    disk."""
    db = store._file._writer
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")


def _make_room(store) -> None:
    store._file._writer.execute("PRAGMA max_page_count = 1073741823")


async def test_a_full_disk_refuses_writes_with_503_and_keeps_serving_reads(hub_env, ann, caplog):
    kept = await subscribe(ann, "law")
    _fill(hub_env.hub.state)
    caplog.set_level(logging.ERROR, logger="feedmesh.hub.web")
    refused = []
    for n in range(30):  # enough rows to need a new page
        status, body = await ann.call("POST", "/api/subscriptions", {"query": f"word{n} " * 20})
        if status != 201:
            refused.append((status, body))
    assert refused, "the database never filled up"
    error = assert_error(*refused[0], 503, "storage_full")
    assert error["retry_after_s"] == 60 and "storage is full" in error["message"]
    assert all(status == 503 for status, _ in refused)
    lines = [r for r in caplog.records if "storage_full" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None  # one line, no traceback
    status, body = await ann.call("GET", f"/api/subscriptions/{kept['id']}")
    assert status == 200 and body["subscription"]["query"] == "law"  # reads go on
    _make_room(hub_env.hub.state)
    await subscribe(ann, "privacy")  # room again: writes work
