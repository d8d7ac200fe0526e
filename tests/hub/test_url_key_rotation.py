"""Rotating and retiring the key that signs private feed URLs (``feedmesh url-key``), on a data
folder and on PostgreSQL: URLs already given keep working after a rotation, new ones are made with
the new key, a retirement ends the old URLs, and running processes follow without a restart."""

from __future__ import annotations

import json
import stat

import pytest

from feedmesh import cli
from feedmesh.compose import FEED_SECRET_FILE, FEED_SECRET_PREVIOUS_FILE
from feedmesh.compose.embedded import embedded_hub
from feedmesh.hub.entry_ids import entry_id_in
from feedmesh.hub.front.tokens import FeedTokens, key_fingerprint

from .conftest import hub_settings


@pytest.fixture(params=["folder", "postgresql"])
def where(request, tmp_path) -> list[str]:
    """The ``url-key`` flags that find the hub's keys."""
    if request.param == "postgresql":
        return ["--data", str(tmp_path), "--store", request.getfixturevalue("postgres_url")]
    return ["--data", str(tmp_path)]


def url_key(capsys, *args: str) -> tuple[int, dict]:
    status = cli.main(["url-key", *args, "--json"])
    out = capsys.readouterr().out
    return status, (json.loads(out) if status == 0 else {})


async def test_rotate_then_retire_with_the_hub_running(tmp_path, where, capsys):
    store = where[3] if len(where) > 2 else ""
    hub = embedded_hub(hub_settings(str(tmp_path)), store_url=store)
    await hub.start()
    try:
        hub.tokens.refresh_s = 0.0  # read the keys at every use (60 s in production)
        account, _ = await hub.front.create_account("ann")
        sub = await hub.front.add_subscription(account.id, name="", query="law", keep=5)
        given = hub.front.feed_token(sub)
        status, shown = url_key(capsys, "show", *where)
        assert status == 0 and shown["previous"] is None
        first = shown["current"]

        status, shown = url_key(capsys, "rotate", *where)
        assert status == 0 and shown["previous"] == first and shown["current"] != first
        assert hub.front.read_feed_token(given) == (sub.id, 0)  # the URL given before still works
        fresh = hub.front.feed_token(sub)
        assert fresh != given and hub.front.read_feed_token(fresh) == (sub.id, 0)
        assert hub.tokens.fingerprints == [shown["current"], first]

        status, shown = url_key(capsys, "retire", *where)
        assert status == 0 and shown["dropped"] == first and shown["previous"] is None
        assert hub.front.read_feed_token(given) is None  # ended
        assert hub.front.read_feed_token(fresh) == (sub.id, 0)
        status, shown = url_key(capsys, "retire", *where)
        assert status == 0 and shown["dropped"] is None  # nothing left to retire
    finally:
        await hub.stop()
    if not store:
        assert stat.S_IMODE((tmp_path / FEED_SECRET_FILE).stat().st_mode) == 0o600
        assert not (tmp_path / FEED_SECRET_PREVIOUS_FILE).exists()
        assert not list(tmp_path.glob(".*.tmp"))
    else:
        assert not (tmp_path / FEED_SECRET_FILE).exists()  # kept in the database only


async def test_a_process_that_has_not_read_the_new_key_reads_its_urls(tmp_path, where, capsys):
    store = where[3] if len(where) > 2 else ""
    hub = embedded_hub(hub_settings(str(tmp_path)), store_url=store)
    await hub.start()
    try:
        assert hub.tokens.refresh_s == 60.0  # it would not read the keys again for a minute
        assert url_key(capsys, "rotate", *where)[0] == 0
        status, shown = url_key(capsys, "show", *where)
        assert status == 0
        # A URL made by another process (a web process that read the keys after the rotation):
        # this one reads the keys again when none it holds reads it.
        new_key = _current_key(tmp_path, store)
        assert key_fingerprint(new_key) == shown["current"]
        assert hub.front.read_feed_token(FeedTokens(new_key).make(41, 2)) == (41, 2)
        assert hub.tokens.fingerprints[0] == shown["current"]
    finally:
        await hub.stop()


def _current_key(folder, store: str) -> bytes:
    if not store:
        return (folder / FEED_SECRET_FILE).read_bytes()
    from feedmesh.store.postgres_hub import PostgresHubState

    state = PostgresHubState(store)
    try:
        return state.feed_secrets()[0]
    finally:
        state.close()


def test_a_folder_without_a_key_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["url-key", "rotate", "--data", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "feedmesh url-key rotate: no feed-secret.key in" in err and "Traceback" not in err
    assert not (tmp_path / "nowhere").exists()  # nothing made


def test_rotating_twice_drops_the_key_before_and_says_so(tmp_path, capsys):
    (tmp_path / FEED_SECRET_FILE).write_bytes(b"a" * 32)
    assert cli.main(["url-key", "rotate", "--data", str(tmp_path)]) == 0
    capsys.readouterr()
    assert cli.main(["url-key", "rotate", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"dropped {key_fingerprint(b'a' * 32)}" in out and "no longer work" in out
    assert b"a" * 32 not in ((tmp_path / FEED_SECRET_FILE).read_bytes(),
                             (tmp_path / FEED_SECRET_PREVIOUS_FILE).read_bytes())


async def test_entry_ids_outlive_a_rotation_and_a_restart(tmp_path, capsys):
    """An entry's id in a private feed (issue 33, item 5) depends on the subscription only, not
    on the URL key: a reader sees no entry twice after a rotation or a restart."""
    hub = embedded_hub(hub_settings(str(tmp_path)))
    await hub.start()
    try:
        account, _ = await hub.front.create_account("ann")
        sub = await hub.front.add_subscription(account.id, name="", query="law", keep=5)
        other = await hub.front.add_subscription(account.id, name="", query="law", keep=5)
        before = [entry_id_in(await hub.front.subscription(s.id), 42) for s in (sub, other)]
        assert before[0] != before[1]
        assert url_key(capsys, "rotate", "--data", str(tmp_path))[0] == 0
        assert [entry_id_in(await hub.front.subscription(s.id), 42)
                for s in (sub, other)] == before
    finally:
        await hub.stop()
    again = embedded_hub(hub_settings(str(tmp_path)))
    await again.start()
    try:
        assert [entry_id_in(await again.front.subscription(s.id), 42)
                for s in (sub, other)] == before
    finally:
        await again.stop()
