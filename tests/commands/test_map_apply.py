"""``feedmesh map --apply`` on a hub's SQLite store (the PostgreSQL path runs in
tests/hub/test_ownership_moves.py): the first mapping, a crawler joining and leaving, the loads
read from the store, and bad input named. No crawler runs here (no --bus): the table is what is
checked."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from feedmesh.cli import main
from feedmesh.compose import open_feed_ownership, open_ingest_store
from feedmesh.fetch import FeedFetchState
from feedmesh.model import Entry
from feedmesh.store import FeedUpdate

HOSTS = ("127.0.1.1", "127.0.1.2")
NEAR = {"eu": HOSTS[0], "na": HOSTS[1], "eu2": HOSTS[0]}


@pytest.fixture
def hub(tmp_path):
    """A data folder with 12 feeds, 6 on each of two servers; feed id 2 posted every hour of
    the two days it was followed (24 polls a day), the others never (1 poll a day)."""
    store = open_ingest_store(tmp_path / "feedmesh.db")
    now = datetime.now(UTC).timestamp()
    try:
        rows = store.add_feeds([f"http://{HOSTS[n % 2]}:8000/feeds/{n}" for n in range(12)],
                               now=now - 2 * 86400.0)  # followed two days ago
        busy = rows[1]
        for hour in range(48):
            entry = Entry(key=f"p{hour}", content_hash=f"h{hour}", title=f"post {hour}")
            store.apply([FeedUpdate(feed_id=busy.id, state=FeedFetchState(url=busy.source_url),
                                    seen_at=now - 3600.0 * hour, entries=(entry,))])
    finally:
        store.close()
    matrix = tmp_path / "rtt.json"
    matrix.write_text(json.dumps({"rtt_ms": {
        name: {f"{host}:8000": 10.0 if host == NEAR[name] else 120.0 for host in HOSTS}
        for name in NEAR}}))
    return tmp_path, matrix


def apply(data, matrix, capsys, *crawlers: str) -> tuple[int, dict]:
    argv = ["map", "--apply", "--data", str(data), "--matrix", str(matrix), "--json",
            "--cycle", "86400"]
    for name in crawlers:
        argv += ["--crawler", f"{name}=127.0.3.{len(argv)}"]
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


def table(data) -> dict[int, tuple[str, str]]:
    ownership = open_feed_ownership(data / "feedmesh.db")
    try:
        return {f: (r.owner, r.next_owner) for f, r in ownership.owners().items()}
    finally:
        ownership.close()


def test_apply_maps_then_stages_for_a_newcomer_and_transfers_from_a_leaver(hub, capsys):
    data, matrix = hub
    code, first = apply(data, matrix, capsys, "eu", "na")
    assert code == 0 and first["transferred"] == 12 and first["staged"] == 0
    owners = table(data)
    assert len(owners) == 12 and not any(staged for _, staged in owners.values())
    # The busy feed (24 polls a day here) weighs as much as many quiet ones: ours balances
    # work, so its crawler holds fewer feeds.
    busy_owner = owners[2][0]
    assert first["crawlers"][busy_owner]["feeds"] < first["crawlers"][
        {"eu": "na", "na": "eu"}[busy_owner]]["feeds"]

    code, joined = apply(data, matrix, capsys, "eu", "na", "eu2")
    assert code == 0 and joined["algorithm"] == "reassigned"
    assert joined["staged"] > 0 and joined["transferred"] == 0
    staged = {f: target for f, (_, target) in table(data).items() if target}
    assert len(staged) == joined["staged"] and set(staged.values()) == {"eu2"}
    # staged, not moved: each still with its owner until that one hands it over
    assert all(owner in ("eu", "na") for owner, target in table(data).values() if target)

    # eu leaves before handing over: its feeds (the staged ones too) go at once.
    code, left = apply(data, matrix, capsys, "na", "eu2")
    assert code == 0 and left["transferred"] > 0
    assert left["departed"] == ["eu"] and left["groups_dropped"] == []  # no --bus: nothing to drop
    after = table(data)
    assert {owner for owner, _ in after.values()} == {"na", "eu2"}
    # what is still staged is a running crawler's to hand over (na's, to eu2), never eu's
    assert all(owner == "na" and target == "eu2" for owner, target in after.values() if target)
    assert sum(1 for _, target in after.values() if target) == left["staged"]


@pytest.mark.parametrize(("extra", "says"), [
    ([], "--apply needs the hub's store"),
    (["--data", "DATA", "--store", "postgresql://x/y"], "one of them"),
    (["--data", "DATA", "--feeds", "f.opml"], "leave out --feeds"),
    (["--store", "sqlite:///x"], "give a postgresql:// URL"),
    (["--data", "NOWHERE"], "no feedmesh.db in"),
])
def test_apply_names_what_is_wrong(hub, capsys, extra, says):
    data, matrix = hub
    argv = ["map", "--apply", "--matrix", str(matrix), "--crawler", "eu=127.0.3.1"]
    argv += [str(data) if part == "DATA" else str(data / "none") if part == "NOWHERE" else part
             for part in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_crawler_takes_a_name_or_a_share_not_both(capsys):
    assert main(["crawler", "--name", "eu", "--shard", "0/2"]) == 2
    assert "exclusive" in capsys.readouterr().err
    assert main(["crawler", "--name", "9eu", "--data", "/nonexistent/x"]) == 2
    assert "crawler name '9eu'" in capsys.readouterr().err
