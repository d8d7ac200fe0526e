"""``feedmesh keys``: files and modes, rotation announced by the old key (in the keyring and in
every log the key signs), revocation, and clear errors for missing, corrupt or too-open files."""

from __future__ import annotations

import json
import os
import stat

import pytest

from feedmesh.cli import main
from feedmesh.mesh.keys import KeyFileError, KeyStore
from feedmesh.mesh.keys.store import verify_announcement
from feedmesh.mesh.records import FeedLog

URL = "http://127.0.4.1:8000/feed.xml"


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_make_writes_a_private_secret(tmp_path, capsys) -> None:
    folder = tmp_path / "keys"
    assert main(["keys", "make", "--dir", str(folder)]) == 0
    assert mode(folder) == 0o700 and mode(folder / "secret.key") == 0o600
    ring = json.loads((folder / "keyring.json").read_text())
    assert ring["feed"] == ring["current"] and ring["current"] in capsys.readouterr().out
    assert main(["keys", "make", "--dir", str(folder)]) == 2      # never overwrites
    assert "refusing to overwrite" in capsys.readouterr().err


def test_show_prints_the_element_and_checks_announcements(tmp_path, capsys) -> None:
    folder = str(tmp_path / "k")
    main(["keys", "make", "--dir", folder])
    main(["keys", "rotate", "--dir", folder])
    capsys.readouterr()
    assert main(["keys", "show", "--dir", folder, "--url", URL]) == 0
    out = capsys.readouterr().out
    ring = KeyStore(folder).keyring()
    assert f'<fm:publicKey algorithm="ed25519">{ring["feed"]}</fm:publicKey>' in out
    assert f'group="{URL}"' in out and "rotate" in out and "ok" in out
    # a forged announcement (signature of another payload) is reported, exit status 1
    ring["announcements"][0] = ring["announcements"][0][:-8] + "AAAAAAA="
    (tmp_path / "k" / "keyring.json").write_text(json.dumps(ring))
    assert main(["keys", "show", "--dir", folder]) == 1
    assert "BAD" in capsys.readouterr().out


def test_rotation_is_signed_by_the_old_key_in_the_log(tmp_path) -> None:
    store = KeyStore(tmp_path)
    first = store.make(1.0)
    writer = store.writer(URL)
    log = FeedLog(store.identity(), URL)
    first_record = writer.append({"id": "1"})
    assert log.receive(first_record).delivered
    store.save_head(writer)

    second = store.rotate(2.0)
    assert second != first and store.keyring()["current"] == second
    note = verify_announcement(store.keyring()["announcements"][0])
    assert (note.type, note.old, note.new) == ("rotate", first, second)
    [rotation] = store.outbox()
    verdict = log.receive(rotation.read_bytes())          # signed by the old key: accepted
    assert verdict.delivered[0].type == "rotate" and log.key == second

    resumed = store.writer(URL)                           # resumes after the rotate record
    assert resumed.key == second and resumed.seq == 2
    later = resumed.append({"id": "2"})
    assert log.receive(later).delivered
    stale = FeedLog(store.identity(), URL)                # never saw the rotation: refuses
    assert stale.receive(first_record).delivered
    assert stale.receive(later).refused == "wrong-key"


def test_revocation_closes_every_log(tmp_path, capsys) -> None:
    store = KeyStore(tmp_path)
    store.make(1.0)
    writer = store.writer(URL)
    log = FeedLog(store.identity(), URL)
    log.receive(writer.append({"id": "1"}))
    store.save_head(writer)
    assert main(["keys", "revoke", "--dir", str(tmp_path)]) == 0
    [revocation] = store.outbox()
    assert log.receive(revocation.read_bytes()).delivered[0].type == "revoke"
    assert log.revoked
    with pytest.raises(KeyFileError, match="revoked"):
        store.writer(URL)
    assert main(["keys", "rotate", "--dir", str(tmp_path)]) == 2
    assert "revoked" in capsys.readouterr().err


@pytest.mark.parametrize(("damage", "words"), [
    (lambda d: (d / "secret.key").unlink(), "secret.key is missing"),
    (lambda d: (d / "secret.key").write_text("garbage"), "is corrupt"),
    (lambda d: (d / "secret.key").write_text('{"algorithm": "ed25519", "seed": "AAAA"}'),
     "32 bytes"),
    (lambda d: os.chmod(d / "secret.key", 0o644), "chmod 600"),
    (lambda d: (d / "keyring.json").write_text("{"), "keyring.json is corrupt"),
    (lambda d: (d / "keyring.json").unlink(), "keyring.json is missing"),
], ids=["missing", "not-json", "short-seed", "too-open", "keyring-corrupt", "keyring-missing"])
def test_bad_key_files_are_clear_errors(tmp_path, capsys, damage, words) -> None:
    folder = tmp_path / "k"
    KeyStore(folder).make(1.0)
    damage(folder)
    assert main(["keys", "show", "--dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_a_secret_from_another_folder_is_refused(tmp_path, capsys) -> None:
    KeyStore(tmp_path / "a").make(1.0)
    KeyStore(tmp_path / "b").make(1.0)
    (tmp_path / "a" / "secret.key").write_bytes((tmp_path / "b" / "secret.key").read_bytes())
    assert main(["keys", "show", "--dir", str(tmp_path / "a")]) == 2
    assert "does not hold the current key" in capsys.readouterr().err


def _append_many(folder: str, url: str, count: int) -> None:
    keys = KeyStore(folder)
    writer = keys.writer(url, republication=True)
    for n in range(count):
        writer.append({"id": str(n)})
        keys.save_head(writer)


def test_processes_signing_with_one_folder_keep_each_others_heads(tmp_path) -> None:
    # `feedmesh up --republish`: every crawler process signs its own feeds with one folder;
    # each saves its log's head after each record, and none may overwrite another's
    import multiprocessing

    keys = KeyStore(tmp_path / "keys")
    keys.make(1.0)
    urls = [f"http://127.0.4.{n}/feed.xml" for n in (1, 2, 3)]
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(str(keys.folder), url, 150))
               for url in urls]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    logs = keys.logs()
    assert {url: logs[url]["seq"] for url in urls} == dict.fromkeys(urls, 150)
    assert not [p for p in keys.folder.iterdir() if p.name.endswith(".tmp")]
