"""Snapshots: round trips, corruption, and read-only sharing with a worker process."""

from __future__ import annotations

import multiprocessing
from multiprocessing import shared_memory

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedmesh.match import Article, IndexSnapshotError
from feedmesh.match.index import IndexSettings, SubscriptionIndex
from feedmesh.match.index.snapshot import MAGIC
from feedmesh.match.workload import Workload

QUERIES = {
    1: "law internet",
    2: '"net neutrality" -spam',
    3: "copyr* title:economy",
    4: "site:bbc.co.uk",
    5: "e-mail (spam OR scam)",
    6: "lang:fr politique",
}
ARTICLES = [
    Article(title="Economy", text="law of the internet, net neutrality and copyright"),
    Article(text="e-mail scam", site="www.bbc.co.uk"),
    Article(text="la politique", language="fr-CA"),
    Article(text="net neutrality spam"),
]


def _index(backend: str = "auto") -> SubscriptionIndex:
    return SubscriptionIndex.build(QUERIES.items(), IndexSettings(backend=backend))


def test_round_trip_keeps_matches_terms_and_statistics(backend: str) -> None:
    index = _index(backend)
    for article in ARTICLES:
        index.match(article)  # observed: the statistics must survive the round trip
    restored = SubscriptionIndex.from_bytes(index.to_bytes(), IndexSettings(backend=backend))
    for article in ARTICLES:
        assert restored.match(article).tolist() == index.match(article).tolist()
    assert restored.vocabulary.texts == index.vocabulary.texts
    assert (restored.vocabulary.fields.view() == index.vocabulary.fields.view()).all()
    assert (restored.vocabulary.kinds.view() == index.vocabulary.kinds.view()).all()
    assert restored.vocabulary.phrases == index.vocabulary.phrases
    assert restored.vocabulary.prefixes == index.vocabulary.prefixes
    assert np.allclose(restored.statistics.estimates(), index.statistics.estimates())
    assert len(restored) == len(index) == len(QUERIES)
    restored.add(7, "internet")  # a restored index is a normal, changeable index
    assert 7 in restored.match(ARTICLES[0]).tolist()


def test_to_bytes_includes_pending_changes() -> None:
    index = _index()
    index.remove(1)
    index.add(8, "politique")
    restored = SubscriptionIndex.from_bytes(index.to_bytes())
    assert restored.match(ARTICLES[0]).tolist() == [2, 3]
    assert restored.match(ARTICLES[2]).tolist() == [6, 8]


def test_empty_index_round_trips() -> None:
    restored = SubscriptionIndex.from_bytes(SubscriptionIndex().to_bytes())
    assert len(restored) == 0 and restored.match(ARTICLES[0]).tolist() == []


def test_loading_does_not_copy_the_arrays() -> None:
    data = bytearray(_index().to_bytes())
    restored = SubscriptionIndex.from_bytes(memoryview(data))
    assert restored._main.buffer.base is not None
    assert not restored._main.buffer.flags.owndata


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda data: data[:10], "snapshot"),
        (lambda data: b"NOTANIDX" + data[8:], "not a feedmesh index snapshot"),
        (lambda data: data[:8] + b"\x09\x00\x00\x00" + data[12:], "format 9 is not supported"),
        (lambda data: data[:-100], "checksum"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "checksum"),
        (lambda data: data[:24] + b"\xff" * 20 + data[44:], "checksum"),
        (lambda data: b"", "too short"),
    ],
)
def test_corrupt_snapshots_raise_snapshot_error(mangle, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IndexSnapshotError, match=message):
        SubscriptionIndex.from_bytes(mangle(_index().to_bytes()))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_damage_never_crashes(data: st.DataObject) -> None:
    original = bytearray(_index().to_bytes())
    damaged = bytearray(original)
    for _ in range(data.draw(st.integers(1, 5))):
        position = data.draw(st.integers(0, len(damaged) - 1))
        damaged[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged)))
    damaged = damaged[:cut]
    try:
        restored = SubscriptionIndex.from_bytes(bytes(damaged))
    except IndexSnapshotError:
        return
    assert damaged == original  # any real damage is detected
    for article in ARTICLES:
        restored.match(article)


def test_header_damage_with_a_recomputed_checksum_is_still_refused() -> None:
    import struct
    import zlib

    data = bytearray(_index().to_bytes())
    header_length = struct.unpack_from("<I", data, 12)[0]
    data[20 : 20 + header_length] = b"{" + b" " * (header_length - 1)
    struct.pack_into("<I", data, 16, zlib.crc32(memoryview(data)[20:]))
    with pytest.raises(IndexSnapshotError, match="header is corrupt"):
        SubscriptionIndex.from_bytes(bytes(data))


def test_validation_catches_structural_damage_even_with_a_valid_checksum() -> None:
    from feedmesh.match.index import snapshot

    index = _index()
    main = index._main
    buffer = main.buffer.copy()
    start = int(main.header[6])  # owner_ids section: an owner beyond the largest id
    buffer[start] = 10**6
    from feedmesh.match.index.compiled import CompiledIndex

    broken = CompiledIndex(buffer, main.header.copy())
    prior, observed = index.statistics.arrays()
    data = snapshot.dump(broken, index.vocabulary, prior, observed, 0.0)
    with pytest.raises(IndexSnapshotError, match="owner id is out of range"):
        SubscriptionIndex.from_bytes(data)
    assert data.startswith(MAGIC)


def _worker(name: str, size: int, texts: list[str], results: multiprocessing.Queue) -> None:
    block = shared_memory.SharedMemory(name=name)
    try:
        index = SubscriptionIndex.from_bytes(block.buf[:size])
        results.put([index.match(Article(text=t), observe=False).tolist() for t in texts])
        del index  # release the views before closing the block
    finally:
        block.close()


@pytest.mark.slow
def test_worker_processes_share_a_snapshot_read_only() -> None:
    workload = Workload(seed=3)
    index = SubscriptionIndex.build(enumerate(workload.subscriptions(20_000)))
    data = index.to_bytes()
    texts = workload.article_texts(5, 61)
    expected = [index.match(Article(text=t), observe=False).tolist() for t in texts]
    block = shared_memory.SharedMemory(create=True, size=len(data))
    try:
        block.buf[: len(data)] = data
        context = multiprocessing.get_context("spawn")
        results: multiprocessing.Queue = context.Queue()
        workers = [
            context.Process(target=_worker, args=(block.name, len(data), texts, results))
            for _ in range(2)
        ]
        for worker in workers:
            worker.start()
        answers = [results.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
            assert worker.exitcode == 0
    finally:
        block.close()
        block.unlink()
    assert answers == [expected, expected]
    assert any(expected)  # the articles do match something


def test_loads_from_an_mmapped_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import mmap

    index = _index()
    path = tmp_path / "index.fmx"
    path.write_bytes(index.to_bytes())
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        restored = SubscriptionIndex.from_bytes(mapped)
        assert [restored.match(a).tolist() for a in ARTICLES] == [
            index.match(a).tolist() for a in ARTICLES
        ]
        assert not restored._main.buffer.flags.writeable  # read-only pages, shared by the OS
        del restored  # drop the views before the map closes
