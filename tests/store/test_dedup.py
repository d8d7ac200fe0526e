from feedmesh.model import Entry
from feedmesh.store import classify_entries, document_hash


def e(key: str, h: str) -> Entry:
    return Entry(key=key, content_hash=h, title=key)


def test_document_hash_is_stable_and_nonzero():
    assert document_hash(b"abc") == document_hash(b"abc")
    assert document_hash(b"abc") != document_hash(b"abd")
    assert document_hash(b"") != 0 and document_hash(b"x") < 2**63


def test_new_updated_and_unchanged():
    known = {"a": "h1", "b": "h2"}
    new, updated = classify_entries([e("a", "h1"), e("b", "h2x"), e("c", "h3")], known,
                                    {"h1", "h2"})
    assert [x.key for x in new] == ["c"]
    assert [x.key for x in updated] == ["b"]


def test_changing_guids_with_same_content_are_not_new():
    new, updated = classify_entries([e("guid-2", "h1")], {"guid-1": "h1"}, {"h1"})
    assert new == [] and updated == []


def test_duplicates_within_one_document_count_once():
    new, _ = classify_entries([e("a", "h1"), e("a", "h2"), e("b", "h1"), e("c", "h3")], {}, set())
    assert [(x.key, x.content_hash) for x in new] == [("a", "h1"), ("c", "h3")]
