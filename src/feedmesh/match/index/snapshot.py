"""The serialized index: one buffer that loads in milliseconds and can be shared read-only.

What is stored is the *compiled* main index (so a restart does not parse or build anything), the
term dictionary, and the term statistics (so access predicates keep what was learned)::

    b"FMSUBIDX" | u32 version | u32 header length | u32 CRC-32 of the rest | header (JSON) |
    sections (each section 64-byte aligned)

The header lists every section's offset, dtype and length. :func:`load` maps the sections with
``numpy.frombuffer`` straight onto the given buffer (bytes, ``mmap``, or a
``multiprocessing.shared_memory`` block), so worker processes that load the same shared block share
its pages. Only the term dictionary is rebuilt per process (one dict entry per term).

Loading validates everything the kernels rely on (offsets, lengths, monotone ranges, ids in range):
a truncated or corrupt buffer raises :class:`~feedmesh.match.errors.IndexSnapshotError` instead of
letting compiled code read out of bounds.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final, NamedTuple

import msgspec
import numpy as np

from feedmesh.match.errors import IndexSnapshotError
from feedmesh.match.index.compiled import PHRASE_FLAG, SECTIONS, TERM_MASK, CompiledIndex
from feedmesh.match.index.vocabulary import Vocabulary

__all__ = ["FORMAT_VERSION", "MAGIC", "Snapshot", "dump", "load", "validate_index"]

MAGIC: Final = b"FMSUBIDX"
FORMAT_VERSION: Final = 2  # 2: owners stored as subscription ids (1 stored positions)
_PREAMBLE = struct.Struct("<8sIII")
_ALIGN: Final = 64


class _Section(msgspec.Struct, frozen=True, array_like=True):
    offset: int
    dtype: str
    length: int


class _Header(msgspec.Struct, frozen=True):
    sections: dict[str, _Section]
    articles_observed: float
    term_count: int


class Snapshot(NamedTuple):
    """What :func:`load` returns: the parts a :class:`SubscriptionIndex` is assembled from."""

    main: CompiledIndex
    vocabulary: Vocabulary
    prior: np.ndarray
    observed: np.ndarray
    articles_observed: float


def dump(
    main: CompiledIndex,
    vocabulary: Vocabulary,
    prior: np.ndarray,
    observed: np.ndarray,
    articles_observed: float,
) -> bytes:
    """Serialize (see the module docstring)."""
    arrays: dict[str, np.ndarray] = {
        "index": main.buffer,
        "index_header": main.header,
        "term_texts": np.frombuffer(vocabulary.text_blob(), dtype=np.uint8),
        "term_fields": vocabulary.fields.view(),
        "term_kinds": vocabulary.kinds.view(),
        "prior": np.ascontiguousarray(prior[: len(vocabulary)], dtype=np.float64),
        "observed": np.ascontiguousarray(observed[: len(vocabulary)], dtype=np.float64),
    }
    sections: dict[str, _Section] = {}
    offset = 0
    for name, array in arrays.items():
        sections[name] = _Section(offset, array.dtype.str, len(array))
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    header = msgspec.json.encode(_Header(sections, float(articles_observed), len(vocabulary)))
    start = -(-(_PREAMBLE.size + len(header)) // _ALIGN) * _ALIGN
    output = bytearray(start + offset)
    output[_PREAMBLE.size : _PREAMBLE.size + len(header)] = header
    for name, array in arrays.items():
        position = start + sections[name].offset
        output[position : position + array.nbytes] = array.tobytes()
    # The checksum catches truncation and bit rot. It is not a security measure: validation on
    # load is what keeps malformed input away from the compiled kernels.
    checksum = zlib.crc32(memoryview(output)[_PREAMBLE.size :])
    _PREAMBLE.pack_into(output, 0, MAGIC, FORMAT_VERSION, len(header), checksum)
    return bytes(output)


def load(data: bytes | bytearray | memoryview, *, validate: bool = True) -> Snapshot:
    """Map a serialized index without copying its arrays; raises :class:`IndexSnapshotError`."""
    view = memoryview(data).cast("B")
    if len(view) < _PREAMBLE.size:
        raise IndexSnapshotError(f"snapshot too short: {len(view)} bytes")
    magic, version, header_length, checksum = _PREAMBLE.unpack_from(view, 0)
    if magic != MAGIC:
        raise IndexSnapshotError(f"not a feedmesh index snapshot (magic {bytes(magic)!r})")
    if version != FORMAT_VERSION:
        raise IndexSnapshotError(f"snapshot format {version} is not supported "
                                 f"(need {FORMAT_VERSION})")
    if zlib.crc32(view[_PREAMBLE.size :]) != checksum:
        raise IndexSnapshotError("snapshot checksum mismatch (truncated or corrupted)")
    try:
        header = msgspec.json.decode(
            view[_PREAMBLE.size : _PREAMBLE.size + header_length], type=_Header
        )
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as error:
        raise IndexSnapshotError(f"snapshot header is corrupt: {error}") from error
    start = -(-(_PREAMBLE.size + header_length) // _ALIGN) * _ALIGN
    arrays = {name: _section(view, start, header, name) for name in
              ("index", "index_header", "term_texts", "term_fields", "term_kinds", "prior",
               "observed")}
    try:
        vocabulary = Vocabulary.from_arrays(
            arrays["term_texts"].tobytes(), arrays["term_fields"], arrays["term_kinds"]
        )
    except (ValueError, IndexError, UnicodeDecodeError) as error:
        raise IndexSnapshotError(f"snapshot term dictionary is corrupt: {error}") from error
    if len(vocabulary) != header.term_count:
        raise IndexSnapshotError(f"snapshot lists {len(vocabulary)} terms, "
                                 f"header says {header.term_count}")
    index_header = arrays["index_header"]
    if len(index_header) != len(SECTIONS) + 1:
        raise IndexSnapshotError("snapshot index header has the wrong number of sections")
    main = _checked_index(arrays["index"], index_header)
    if validate:
        validate_index(main, vocabulary)
    for name in ("prior", "observed"):
        if len(arrays[name]) != len(vocabulary):
            raise IndexSnapshotError(f"snapshot {name} statistics do not cover every term")
    return Snapshot(main, vocabulary, arrays["prior"], arrays["observed"], header.articles_observed)


def _section(view: memoryview, start: int, header: _Header, name: str) -> np.ndarray:
    section = header.sections.get(name)
    if section is None:
        raise IndexSnapshotError(f"snapshot has no {name!r} section")
    try:
        dtype = np.dtype(section.dtype)
    except TypeError as error:
        raise IndexSnapshotError(f"snapshot section {name!r} has bad dtype "
                                 f"{section.dtype!r}") from error
    begin = start + section.offset
    end = begin + section.length * dtype.itemsize
    if section.offset < 0 or section.length < 0 or end > len(view):
        raise IndexSnapshotError(f"snapshot section {name!r} runs past the end (truncated?)")
    return np.frombuffer(view[begin:end], dtype=dtype)


def _checked_index(buffer: np.ndarray, header: np.ndarray) -> CompiledIndex:
    if buffer.dtype != np.int32 or header.dtype != np.int64:
        raise IndexSnapshotError("snapshot index arrays have the wrong dtype")
    if header[0] != 0 or header[-1] != len(buffer) or (np.diff(header) < 0).any():
        raise IndexSnapshotError("snapshot index sections overlap or run past the buffer")
    return CompiledIndex(buffer, header)


def validate_index(main: CompiledIndex, vocabulary: Vocabulary) -> None:
    """Check every invariant the kernels rely on; raise :class:`IndexSnapshotError` if one fails."""
    terms, conjunctions = main.term_count, main.conjunction_count
    subscriptions = main.subscription_count

    def fail(what: str) -> None:
        raise IndexSnapshotError(f"snapshot index is corrupt: {what}")

    if terms > len(vocabulary):
        fail(f"{terms} indexed terms but only {len(vocabulary)} in the dictionary")
    for name, starts, total in (
        ("post_start", main.post_start, conjunctions),
        ("rest_start", main.rest_start, len(main.rest_terms)),
        ("owner_start", main.owner_start, len(main.owner_ids)),
    ):
        if len(starts) == 0 or starts[0] != 0 or starts[-1] != total or (np.diff(starts) < 0).any():
            fail(f"{name} is not a monotone range over its section")
    if len(main.immediate_end) != terms or len(main.plain_end) != terms:
        fail("run boundaries do not cover every term")
    if (
        (main.immediate_end < main.post_start[:-1]).any()
        or (main.plain_end < main.immediate_end).any()
        or (main.post_start[1:] < main.plain_end).any()
    ):
        fail("run boundaries fall outside their posting ranges")
    if len(main.rest_start) != conjunctions + 1 or len(main.owner_start) != conjunctions + 1:
        fail("conjunction arrays disagree in length")
    codes = main.rest_terms.astype(np.int64)
    plain = np.where(codes < 0, -codes - 1, codes)
    ids = plain & TERM_MASK
    if len(ids) and (ids.max() >= len(vocabulary) or plain.max() >= 2 * PHRASE_FLAG):
        fail("a term id is out of range")
    phrase_ids = ids[plain >= PHRASE_FLAG]
    if len(phrase_ids) and (vocabulary.phrase_tables().of_term[phrase_ids] < 0).any():
        fail("a term marked as a phrase is not one")
    if subscriptions and (main.members[0] < 0 or (np.diff(main.members) <= 0).any()):
        fail("subscription ids are not sorted and unique")
    if len(main.owner_ids) and (
        main.owner_ids.min() < 0
        or main.owner_ids.max() > (main.members[-1] if subscriptions else -1)
    ):
        fail("an owner id is out of range")
