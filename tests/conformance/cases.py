"""Run feedmesh's parser over every conformance case once, and keep the verdicts.

The per-case tests (one pytest case per file, so each failure is named) and the share test read
the same cached results, so the corpora are parsed once per session (about half a second).

Shares count *expectations*: one per feedparser case whose ``Expect:`` is mappable, one per
compared field for feed-rs and rss-parser. A verified deliberate difference (a title compared as
text, a plain-text body compared escaped; see :mod:`.feedparser_adapter`) counts as agreeing,
and is reported separately; a listed known difference (:mod:`.known`) counts as *not* agreeing.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path

import msgspec

from feedmesh.feeds import parse_feed
from feedmesh.feeds.urls import resolve_url
from feedmesh.model import ParsedFeed
from tests.conformance.corpus import CORPUS, case_id, read_header
from tests.conformance.feedparser_adapter import Verdict, evaluate, unmappable_reason
from tests.conformance.known import KNOWN, known_reason, matches
from tests.conformance.structured import Check, compare_feed_rs, compare_rss_parser

__all__ = ["FeedparserCase", "FieldCase", "Share", "feed_rs_cases", "feedparser_cases",
           "rss_parser_cases", "shares"]

TEST_SERVER = "http://127.0.0.1:8097/"  # the document URI feedparser's own suite serves from


class FeedparserCase(msgspec.Struct, frozen=True):
    id: str
    expect: str
    parsed: ParsedFeed
    unmappable: str | None
    verdict: str  # a Verdict value, or "" when unmappable
    known: str | None


class FieldCase(msgspec.Struct, frozen=True):
    id: str
    parsed: ParsedFeed
    checks: tuple[Check, ...]

    def failures(self) -> list[tuple[Check, str | None]]:
        return [(check, known_reason(f"{self.id}::{check.field}"))
                for check in self.checks if not check.ok]

    def stale_known(self) -> list[str]:
        """Known differences listed for this case that no failing field needs any more."""
        failing = [f"{self.id}::{check.field}" for check in self.checks if not check.ok]
        return [pattern for pattern in KNOWN if pattern.startswith(self.id + "::")
                and not any(matches(pattern, field) for field in failing)]


class Share(msgspec.Struct, frozen=True):
    corpus: str
    mappable: int
    passed: int
    deliberate: int
    known: int
    failed: int
    unmappable: int

    @property
    def share(self) -> float:
        return (self.passed + self.deliberate) / self.mappable if self.mappable else 1.0

    @property
    def strict_share(self) -> float:
        return self.passed / self.mappable if self.mappable else 1.0


def _http_base(path: Path, headers: dict[str, str]) -> str:
    """The base URL feedparser's suite would give a case it serves over HTTP."""
    document = TEST_SERVER + path.relative_to(CORPUS / "feedparser").as_posix()
    location = headers.get("content-location")
    return (resolve_url(document, location) if location else "") or document


@cache
def feedparser_cases() -> tuple[FeedparserCase, ...]:
    cases = []
    for path in sorted((CORPUS / "feedparser" / "wellformed").rglob("*.xml")):
        data = path.read_bytes()
        header = read_header(data)
        identifier = case_id(path)
        headers = dict(header.headers)
        over_http = "/http" in identifier or "http_" in path.name
        base = _http_base(path, headers) if over_http else ""
        content_type = headers.get("content-type", "text/xml" if over_http else "")
        parsed = parse_feed(data, url=base, content_type=content_type)
        reason = unmappable_reason(header.expect) if header.expect else "no Expect: line"
        verdict = "" if reason else evaluate(header.expect, parsed)
        cases.append(FeedparserCase(identifier, header.expect, parsed, reason, verdict,
                                    known_reason(identifier)))
    return tuple(cases)


def _source_of(expectation: Path) -> Path:
    stem = expectation.name[: -len(".serde.json")]
    for candidate in sorted(expectation.parent.iterdir()):
        if candidate.name.startswith(stem + ".") and not candidate.name.endswith(".serde.json"):
            return candidate
    raise FileNotFoundError(f"no source document for {expectation}")


@cache
def feed_rs_cases() -> tuple[FieldCase, ...]:
    cases = []
    for expectation in sorted((CORPUS / "feed-rs-fixtures").rglob("*.serde.json")):
        source = _source_of(expectation)
        data = source.read_bytes()
        parsed = parse_feed(data)
        checks = compare_feed_rs(json.loads(expectation.read_bytes()), parsed, data)
        cases.append(FieldCase(case_id(source), parsed, tuple(checks)))
    return tuple(cases)


@cache
def rss_parser_cases() -> tuple[FieldCase, ...]:
    cases = []
    inputs = {path.stem: path for path in (CORPUS / "rss-parser-node" / "input").iterdir()}
    for expectation in sorted((CORPUS / "rss-parser-node" / "output").glob("*.json")):
        source = inputs[expectation.stem]
        parsed = parse_feed(source.read_bytes())
        raw = expectation.read_bytes()
        try:
            expected = json.loads(raw)
        except UnicodeDecodeError:  # one output file was saved in ISO-8859-1
            expected = json.loads(raw.decode("latin-1"))
        is_atom = parsed.feed.format.startswith("atom")
        checks = compare_rss_parser(expected["feed"], parsed, is_atom)
        cases.append(FieldCase(case_id(source), parsed, tuple(checks)))
    return tuple(cases)


def _field_share(corpus: str, cases: tuple[FieldCase, ...]) -> Share:
    counts: Counter[str] = Counter()
    for case in cases:
        for check in case.checks:
            if check.ok:
                counts["passed"] += 1
            elif known_reason(f"{case.id}::{check.field}") is not None:
                counts["known"] += 1
            else:
                counts["failed"] += 1
    total = counts["passed"] + counts["known"] + counts["failed"]
    return Share(corpus, total, counts["passed"], 0, counts["known"], counts["failed"], 0)


def shares() -> list[Share]:
    counts: Counter[str] = Counter()
    for case in feedparser_cases():
        if case.unmappable:
            counts["unmappable"] += 1
        elif case.verdict in (Verdict.PASS, Verdict.SAME_HTML):
            counts["passed"] += 1
        elif case.verdict in (Verdict.PLAIN_TITLE, Verdict.ESCAPED_TEXT):
            counts["deliberate"] += 1
        elif case.known:
            counts["known"] += 1
        else:
            counts["failed"] += 1
    mappable = counts["passed"] + counts["deliberate"] + counts["known"] + counts["failed"]
    return [
        Share("feedparser wellformed", mappable, counts["passed"], counts["deliberate"],
              counts["known"], counts["failed"], counts["unmappable"]),
        _field_share("feed-rs", feed_rs_cases()),
        _field_share("rss-parser", rss_parser_cases()),
    ]
