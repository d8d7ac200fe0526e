"""Whose keys a peer follows (mesh/peer/trust.py) and what a record's entry becomes in the
archive (mesh/peer/multicast.py): table-driven."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from feedmesh.mesh.peer.multicast import entry_from_record
from feedmesh.mesh.peer.trust import PinnedKeys, TrustSettings, decide
from feedmesh.model import MeshSubscribe

A, B = "A" * 43 + "=", "B" * 43 + "="
FIRST_USE, LISTED = TrustSettings(), TrustSettings("listed", frozenset({A}))


@pytest.mark.parametrize(("settings", "element", "pinned", "refused"), [
    (FIRST_USE, MeshSubscribe(public_key=A, republication=True), None, None),
    (FIRST_USE, MeshSubscribe(public_key=A), A, None),
    (FIRST_USE, MeshSubscribe(public_key=B, republication=True), A, "pinned at first use"),
    (FIRST_USE, MeshSubscribe(public_key=B), A, "pinned at first use"),
    (LISTED, MeshSubscribe(public_key=A, republication=True), None, None),
    (LISTED, MeshSubscribe(public_key=B, republication=True), None, "is not listed"),
    (LISTED, MeshSubscribe(public_key=B), None, None),     # the publisher's own key
    (LISTED, MeshSubscribe(public_key=A, republication=True), B, "pinned at first use"),
])
def test_decide(settings, element, pinned, refused) -> None:
    why = decide(settings, element, pinned)
    assert (why is None) if refused is None else (refused in why)


def test_an_unknown_policy_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="first-use, listed"):
        TrustSettings("always")


def test_pinned_keys_survive_a_restart(tmp_path) -> None:
    pins = PinnedKeys(tmp_path / "pinned-keys.json")
    pins.pin("http://127.0.4.1/feeds/0", A)
    assert PinnedKeys(tmp_path / "pinned-keys.json").get("http://127.0.4.1/feeds/0") == A
    (tmp_path / "pinned-keys.json").write_text("not json")
    assert PinnedKeys(tmp_path / "pinned-keys.json").get("http://127.0.4.1/feeds/0") is None


def test_entry_from_record() -> None:
    entry = entry_from_record({"key": "k1", "guid": "g1", "title": "T", "link": "http://x/1",
                               "summary": "<p>s</p>", "published": "2026-01-02T03:04:05+00:00"},
                              republished_by=A)
    assert (entry.key, entry.guid, entry.title, entry.link, entry.summary) == \
        ("k1", "g1", "T", "http://x/1", "<p>s</p>")
    assert entry.published == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    # the mark is not a category a reader would show (issue 32 item 8)
    assert entry.republished_by == A and entry.categories == () and entry.content_hash
    publisher = entry_from_record({"key": "hash:abc", "title": "T", "published": "garbage"}, None)
    assert (publisher.guid, publisher.republished_by, publisher.published) == ("", "", None)
    assert entry_from_record({"title": "no key"}, None) is None
    assert entry_from_record({"key": 5, "title": ["not", "text"]}, None) is None
