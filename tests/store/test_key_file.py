"""The feed-URL key in a file of its own, 0600, moved out of hub.db once."""

from __future__ import annotations

import secrets
import stat

import pytest

from feedmesh.compose import FEED_SECRET_FILE
from feedmesh.compose.embedded import embedded_hub
from feedmesh.compose.settings import HubSettings
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.store import StoreError
from feedmesh.store.key_file import read_or_create_key
from feedmesh.store.sqlite_hub import SQLiteHubState


def test_a_key_is_made_once_readable_by_its_owner_only(tmp_path):
    path = tmp_path / "k.key"
    made = read_or_create_key(path, lambda: secrets.token_bytes(32))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_or_create_key(path, lambda: b"never used" * 10) == made
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_short_or_unreadable_key_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="at least 32 bytes"):
        read_or_create_key(tmp_path / "a.key", lambda: b"short")
    (tmp_path / "b.key").write_bytes(b"x" * 5)
    with pytest.raises(StoreError, match=r"holds 5 bytes.*restore it from a backup"):
        read_or_create_key(tmp_path / "b.key", lambda: secrets.token_bytes(32))
    with pytest.raises(StoreError, match="cannot write the key file"):
        read_or_create_key(tmp_path / "no-such-dir" / "c.key", lambda: secrets.token_bytes(32))


def test_a_key_kept_in_an_older_hub_db_moves_to_its_file_and_urls_keep_working(tmp_path):
    old = secrets.token_bytes(32)
    state = SQLiteHubState(tmp_path / "hub.db")  # as a hub before the key file wrote it
    with state._file.write("an older hub's secret") as db:
        db.execute("INSERT INTO meta VALUES ('feed_secret', ?)", (old,))
    state.close()
    hub = embedded_hub(HubSettings(data_dir=str(tmp_path)))
    try:
        issued = FeedTokens(old).make(7, 0)
        assert hub.front.read_feed_token(issued) == (7, 0)  # a URL issued before still works
        assert (tmp_path / FEED_SECRET_FILE).read_bytes() == old
        assert hub.state.legacy_feed_secret() is None  # and hub.db holds it no more
    finally:
        hub.store.close()
        hub.state.close()
        for reflector in hub.reflectors:
            reflector.close()
