"""Evaluate feedparser's ``Expect:`` expressions against feedmesh's model.

feedparser's test cases state their expectation as a Python expression over feedparser's result
(``not bozo and entries[0]['title'] == 'x'``). This module

1. presents a :class:`~feedmesh.model.ParsedFeed` in feedparser's vocabulary
   (:func:`as_feedparser`),
   for the keys that have a counterpart in our model (:data:`MAPPABLE`); and
2. decides whether an expression is *mappable*: every name and every key path it reads must be in
   that vocabulary. An expression that reads anything else (``feed['cloud']``, ``headers``,
   ``title_detail['base']``) is counted as not mappable, never as a failure.

Vocabulary notes (each mirrors what feedparser itself does, so the expectations mean the same):

* ``author`` is ``"name (email)"`` (or the one that exists), as feedparser builds it;
* an entry's ``summary`` falls back to its content, as feedparser copies content into summary;
* ``updated_parsed`` falls back to ``published_parsed`` (feedparser's documented fallback);
* ``ttl`` and enclosure ``length`` are strings, dates are UTC ``struct_time`` tuples;
* ``bozo`` is true when the parser reported any problem.

One deliberate difference has a verified alternative (:func:`evaluate`): titles are plain text in
feedmesh, so a title expectation with markup is checked against the same title as text.
"""

from __future__ import annotations

import ast
import html
from typing import Any

import lxml.html

from feedmesh.feeds.sanitize import html_to_text
from feedmesh.model import Entry, ParsedFeed, Person

__all__ = ["MAPPABLE", "Verdict", "as_feedparser", "evaluate", "unmappable_reason"]

N = "#"  # any list index in a key path
_PERSON = ("name", "email", "href")
_FEED_KEYS = [
    ("title",), ("title_detail", "value"), ("link",), ("subtitle",), ("subtitle_detail", "value"),
    ("tagline",), ("tagline_detail", "value"), ("description",), ("language",),
    ("updated_parsed",), ("modified_parsed",), ("author",), ("ttl",), ("icon",),
    *[("author_detail", key) for key in _PERSON], *[("authors", N, key) for key in _PERSON],
]
_ENTRY_KEYS = [
    ("id",), ("title",), ("title_detail", "value"), ("link",), ("summary",), ("description",),
    ("summary_detail", "value"), ("summary_detail", "language"), ("content", N, "value"),
    ("content", N, "language"), ("published_parsed",), ("issued_parsed",), ("updated_parsed",),
    ("modified_parsed",), ("date_parsed",), ("author",), ("category",), ("tags", N, "term"),
    ("enclosures", N, "href"), ("enclosures", N, "type"), ("enclosures", N, "length"),
    *[("author_detail", key) for key in _PERSON], *[("authors", N, key) for key in _PERSON],
]
MAPPABLE = frozenset(
    [("feed", *path) for path in _FEED_KEYS]
    + [("entries", N, *path) for path in _ENTRY_KEYS]
    + [("entries",), ("bozo",), ("encoding",), ("version",)]
)
_TITLE_PATHS = frozenset(path for path in MAPPABLE if "title" in path or "title_detail" in path)
_BODY_PATHS = frozenset(path for path in MAPPABLE if set(path) & {
    "summary", "description", "content", "subtitle", "tagline", "summary_detail",
    "subtitle_detail", "tagline_detail"})
_BUILTINS = {"len": len, "True": True, "False": False, "None": None}
# feedparser version names that our closed format vocabulary deliberately does not distinguish
_UNMAPPABLE_VERSIONS = {"rss091n", "rss091u", "rss093", "rss094", "rss", "cdf", ""}
_VERSIONS = {"rss0.90": "rss090", "rss0.92": "rss092", "rss2.0": "rss20", "rss1.0": "rss10",
             "atom0.3": "atom03", "atom1.0": "atom10", "json1.0": "json1", "json1.1": "json11",
             "rss0.91": "rss091"}


class FPDict(dict):
    """feedparser's dict that also answers attribute access (``feed.link``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


def _person(person: Person) -> FPDict:
    detail = FPDict()
    if person.name:
        detail["name"] = person.name
    if person.email:
        detail["email"] = person.email
    if person.uri:
        detail["href"] = person.uri
    return detail


def _author_fields(target: FPDict, authors: tuple[Person, ...]) -> None:
    if not authors:
        return
    first = authors[0]
    if first.name and first.email:
        target["author"] = f"{first.name} ({first.email})"
    elif first.name or first.email:
        target["author"] = first.name or first.email
    target["author_detail"] = _person(first)
    target["authors"] = [_person(person) for person in authors]


def _put(target: FPDict, key: str, value: object) -> None:
    if value not in ("", None, (), []):
        target[key] = value


def _entry(entry: Entry) -> FPDict:
    result = FPDict()
    _put(result, "id", entry.guid)
    if entry.title:
        result["title"] = entry.title
        result["title_detail"] = FPDict(value=entry.title)
    _put(result, "link", entry.link)
    summary = entry.summary or entry.content
    if summary:
        result["summary"] = result["description"] = summary
        result["summary_detail"] = FPDict(value=summary, language=entry.language or None)
    if entry.content:
        result["content"] = [FPDict(value=entry.content, language=entry.language or None)]
    if entry.published is not None:
        result["published_parsed"] = result["issued_parsed"] = entry.published.utctimetuple()
    updated = entry.updated or entry.published
    if updated is not None:
        moment = updated.utctimetuple()
        result["updated_parsed"] = result["modified_parsed"] = result["date_parsed"] = moment
    _author_fields(result, entry.authors)
    if entry.categories:
        result["category"] = entry.categories[0]
        result["tags"] = [FPDict(term=term) for term in entry.categories]
    if entry.enclosures:
        result["enclosures"] = [
            FPDict(href=e.url, type=e.type, **({"length": str(e.length)} if e.length is not None
                                               else {}))
            for e in entry.enclosures]
    return result


def as_feedparser(parsed: ParsedFeed) -> dict[str, Any]:
    """The names an ``Expect:`` expression may read, in feedparser's shapes."""
    info = parsed.feed
    feed = FPDict()
    if info.title:
        feed["title"] = info.title
        feed["title_detail"] = FPDict(value=info.title)
    _put(feed, "link", info.link)
    if info.description:
        for key in ("subtitle", "tagline", "description"):
            feed[key] = info.description
        feed["subtitle_detail"] = feed["tagline_detail"] = FPDict(value=info.description)
    _put(feed, "language", info.language)
    if info.updated is not None:
        feed["updated_parsed"] = feed["modified_parsed"] = info.updated.utctimetuple()
    _author_fields(feed, info.authors)
    if info.ttl_minutes is not None:
        feed["ttl"] = str(info.ttl_minutes)
    _put(feed, "icon", info.icon)
    return {
        "bozo": parsed.error is not None,
        "feed": feed,
        "entries": [_entry(entry) for entry in parsed.entries],
        "encoding": parsed.encoding,
        "version": _VERSIONS.get(info.format, ""),
    }


def _chain(node: ast.AST) -> tuple[str, ...] | None:
    """The key path of ``entries[0]['title']`` as ("entries", "#", "title"); None if not a chain."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, int):
                parts.append(N)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                parts.append(key.value)
            else:
                return None
            node = node.value
        elif isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return tuple(reversed(parts))
        else:
            return None


def unmappable_reason(expression: str) -> str | None:
    """Why ``expression`` cannot be checked against our model, or None when it can."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return "the expression does not parse"
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                _chain(operand) == ("version",) for operand in [node.left, *node.comparators]):
            for operand in [node.left, *node.comparators]:
                if isinstance(operand, ast.Constant) and operand.value in _UNMAPPABLE_VERSIONS:
                    return f"version {operand.value!r} has no counterpart in our format names"
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Subscript, ast.Attribute, ast.Name)) or id(node) in inner:
            continue
        if isinstance(node, ast.Name) and node.id in _BUILTINS:
            continue
        path = _chain(node)
        if path is None:
            return f"reads something other than a key path: {ast.unparse(node)}"
        if path not in MAPPABLE:
            return f"reads {'.'.join(path)}, which has no counterpart in our model"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                               and node.func.id == "len"):
            return f"calls {ast.unparse(node.func)}"
    return None


class _TitlesAsText(ast.NodeTransformer):
    """Rewrite ``<title path> == 'markup'`` into a comparison with the markup's plain text."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        operands = [node.left, *node.comparators]
        if any(_chain(operand) in _TITLE_PATHS for operand in operands):
            for index, operand in enumerate(operands):
                if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
                    operands[index] = ast.Constant(html_to_text(operand.value))
            node.left, node.comparators = operands[0], operands[1:]
        return node


class _AsHtml(ast.NodeTransformer):
    """Rewrite ``<path> == 'markup'`` into ``_same_html(<path>, 'markup')``."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Eq):
            return node
        left, right = node.left, node.comparators[0]
        if _chain(left) is not None and isinstance(right, ast.Constant) and isinstance(
                right.value, str):
            return ast.Call(ast.Name("_same_html", ast.Load()), [left, right], [])
        return node


class _EscapedText(ast.NodeTransformer):
    """Rewrite ``<path> == 'text'`` into ``<path> == html.escape('text')``."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        operands = [node.left, *node.comparators]
        if any(_chain(operand) in _BODY_PATHS for operand in operands):
            for index, operand in enumerate(operands):
                if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
                    operands[index] = ast.Constant(html.escape(operand.value, quote=False))
            node.left, node.comparators = operands[0], operands[1:]
        return node


def _canonical_html(markup: str) -> str:
    """``markup`` parsed as HTML and serialized again: equal for equal HTML."""
    if not markup.strip():
        return ""
    try:
        wrapper = lxml.html.fragment_fromstring(markup, create_parent="div")
    except Exception:  # noqa: BLE001 - what lxml cannot read is compared as it was
        return markup
    serialized = lxml.html.tostring(wrapper, encoding="unicode")
    return serialized[len("<div>"):-len("</div>")].strip()


def _same_html(ours: object, expected: str) -> bool:
    return isinstance(ours, str) and _canonical_html(ours) == _canonical_html(expected)


class Verdict:
    PASS = "pass"
    SAME_HTML = "pass:same-html-serialized-differently"
    FAIL = "fail"
    PLAIN_TITLE = "deliberate:plain-text-title"
    ESCAPED_TEXT = "deliberate:text-body-escaped-as-html"


def _run(tree: ast.Expression, names: dict[str, Any]) -> bool:
    try:
        # A feedparser test's own expectation, checked as an AST first, with few builtins.
        return bool(eval(compile(tree, "<expect>", "eval"),  # noqa: S307
                         {"__builtins__": _BUILTINS}, names))
    except Exception:  # noqa: BLE001 - KeyError, IndexError, TypeError: the expectation is not met
        return False


def evaluate(expression: str, parsed: ParsedFeed) -> str:
    """:class:`Verdict` of a mappable expression against ``parsed``.

    Besides a plain pass, three readings are tried, each reported under its own name:
    HTML that differs only in serialization (``<br />`` and ``<br>``, ``&#x61;`` and ``a``) passes;
    a title compared as plain text, and a plain-text body compared in its HTML-escaped form, are
    the two deliberate differences of docs/conformance.md, verified rather than assumed.
    """
    names = as_feedparser(parsed)
    names["_same_html"] = _same_html
    tree = ast.parse(expression, mode="eval")
    if _run(tree, names):
        return Verdict.PASS
    for transformer, verdict in ((_AsHtml, Verdict.SAME_HTML), (_TitlesAsText, Verdict.PLAIN_TITLE),
                                 (_EscapedText, Verdict.ESCAPED_TEXT)):
        rewritten = ast.fix_missing_locations(transformer().visit(ast.parse(expression, "",
                                                                              "eval")))
        if ast.unparse(rewritten) != ast.unparse(tree) and _run(rewritten, names):
            return verdict
    return Verdict.FAIL
