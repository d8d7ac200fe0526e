"""Signed feed records: the publisher signs, every receiver verifies (issue 14, sections 2 and 3).

Front door::

    writer = FeedWriter(SigningKey.generate(), "https://example.org/feed.xml")
    wire = writer.append({"id": "1", "title": "..."})      # bytes to multicast
    log = FeedLog(writer.feed, writer.url)                 # a subscriber's state
    verdict = log.receive(wire)                            # delivered / refused / missing seqs

Layers, bottom-up: ``canonical`` (RFC 8785) < ``record`` (wire form, signing, opening) < ``log``
(per-feed chain, rotation, revocation, gaps). Pure: no clock, no I/O.
"""

from feedmesh.mesh.records.canonical import NotCanonicalizable, canonical_bytes
from feedmesh.mesh.records.log import FeedLog, Verdict
from feedmesh.mesh.records.record import FeedWriter, InvalidRecord, Record, open_record, record_hash

__all__ = [
    "FeedLog", "FeedWriter", "InvalidRecord", "NotCanonicalizable", "Record", "Verdict",
    "canonical_bytes", "open_record", "record_hash",
]
