"""Expand a query into OR-ed conjunctions (disjunctive normal form), and refuse useless queries.

The index files each conjunction separately, so this is where the *disjunction blow-up* cap is
enforced: ``(a OR b) (c OR d) (e OR f)`` is 8 conjunctions, and the expansion stops with a
:class:`QueryError` as soon as an intermediate result exceeds ``max_conjunctions``.

NOT is pushed down to the terms (De Morgan). A hyphenated :class:`Compound` expands to its phrase OR
its joined word. Then every conjunction is checked:

* it must contain a positive term: ``NOT patent`` alone is refused ("NOT alone cannot match
  anything"): an index can only find articles by what they contain;
* its positive terms must not all be stop words or ``lang:`` (they would match almost every
  article);
* a conjunction that requires and excludes the same thing is dropped; if none is left, the query
  "can never match" and is refused;
* a conjunction that contains another one adds nothing (``a OR (a AND b)`` is ``a``) and is dropped.
"""

from __future__ import annotations

import msgspec

from feedmesh.match.errors import QueryError
from feedmesh.match.query.ast import Compound, Phrase, Prefix, Term, Word, render
from feedmesh.match.query.limits import QueryLimits
from feedmesh.match.query.parser import Positioned

__all__ = ["Conjunction", "expand"]


class Conjunction(msgspec.Struct, frozen=True):
    """Terms that must all be present (``positive``) and none of which may be (``negative``)."""

    positive: tuple[Term, ...]
    negative: tuple[Term, ...] = ()

    def render(self) -> str:
        return " AND ".join(
            [render(term) for term in self.positive] + [f"NOT {render(t)}" for t in self.negative]
        )


# While expanding, a conjunction is two dicts term -> position (where the term was written).
_Draft = tuple[dict[Term, int], dict[Term, int]]


def expand(tree: Positioned, limits: QueryLimits) -> tuple[Conjunction, ...]:
    """The checked conjunctions of ``tree`` (see the module docstring), in canonical order."""
    drafts = _satisfiable(_expand(tree, False, limits, tree.position))
    if not drafts:
        raise QueryError(
            "query can never match: every alternative requires and excludes the same thing",
            tree.position,
            "remove the NOT that contradicts a required word",
        )
    drafts = _without_absorbed(drafts)
    for positive, negative in drafts:
        _check_selective(positive, negative, limits)
    conjunctions = {
        c.render(): c
        for c in (
            Conjunction(
                tuple(sorted(positive, key=render)), tuple(sorted(negative, key=render))
            )
            for positive, negative in drafts
        )
    }
    return tuple(conjunctions[key] for key in sorted(conjunctions))


def _expand(
    node: Positioned, negated: bool, limits: QueryLimits, negated_at: int
) -> list[_Draft]:
    """DNF of ``node`` (negated if ``negated``); a NOT term records where its NOT was written."""
    if node.kind == "term":
        term = node.term
        if isinstance(term, Compound):  # phrase of the parts OR the joined word
            alternatives = [
                Positioned("term", node.position, term=Phrase(term.field, term.parts)),
                Positioned("term", node.position, term=Word(term.field, term.joined)),
            ]
            return _expand(
                Positioned("or", node.position, alternatives), negated, limits, negated_at
            )
        assert isinstance(term, (Word, Prefix, Phrase))
        return [({}, {term: negated_at})] if negated else [({term: node.position}, {})]
    if node.kind == "not":
        return _expand(node.children[0], not negated, limits, node.position)
    is_and = (node.kind == "and") != negated  # De Morgan: a negated OR is an AND, and vice versa
    parts = [_expand(child, negated, limits, negated_at) for child in node.children]
    if not is_and:
        return _deduplicated([draft for part in parts for draft in part], node, limits)
    product: list[_Draft] = [({}, {})]
    for part in parts:
        combined = [
            ({**left_pos, **right_pos}, {**left_neg, **right_neg})
            for left_pos, left_neg in product
            for right_pos, right_neg in part
        ]
        product = _deduplicated(combined, node, limits)
    return product


def _deduplicated(drafts: list[_Draft], node: Positioned, limits: QueryLimits) -> list[_Draft]:
    unique: dict[tuple[frozenset[Term], frozenset[Term]], _Draft] = {}
    for draft in drafts:
        unique.setdefault((frozenset(draft[0]), frozenset(draft[1])), draft)
    if len(unique) > limits.max_conjunctions:
        raise QueryError(
            f"too many alternatives: the ORs expand to more than {limits.max_conjunctions} "
            "AND-groups",
            node.position,
            "split the query into several subscriptions, or use fewer ORs",
        )
    return list(unique.values())


def _implied_tokens(term: Term) -> tuple[str, ...]:
    if isinstance(term, Word):
        return (term.token,)
    if isinstance(term, Phrase):
        return term.tokens
    return ()


def _contradicts(positive: dict[Term, int], negative: dict[Term, int]) -> bool:
    if positive.keys() & negative.keys():
        return True
    required = {(term.field, token) for term in positive for token in _implied_tokens(term)}
    for excluded in negative:
        if isinstance(excluded, Word) and (excluded.field, excluded.token) in required:
            return True
        if isinstance(excluded, Prefix) and any(
            field == excluded.field and token.startswith(excluded.prefix)
            for field, token in required
        ):
            return True
    return False


def _satisfiable(drafts: list[_Draft]) -> list[_Draft]:
    return [draft for draft in drafts if not _contradicts(*draft)]


def _without_absorbed(drafts: list[_Draft]) -> list[_Draft]:
    keys = [(frozenset(pos), frozenset(neg)) for pos, neg in drafts]
    kept = []
    for index, (pos, neg) in enumerate(keys):
        absorbed = any(
            other != (pos, neg) and other[0] <= pos and other[1] <= neg for other in keys
        )
        if not absorbed:
            kept.append(drafts[index])
    return kept


def _check_selective(
    positive: dict[Term, int], negative: dict[Term, int], limits: QueryLimits
) -> None:
    if not positive:
        position = min(negative.values())
        raise QueryError(
            "NOT alone cannot match anything",
            position,
            "NOT only excludes; add a word to search for, e.g. 'law NOT patent'",
        )
    broad = [
        term
        for term in positive
        if isinstance(term, Word)
        and (term.field == "lang" or (term.field != "site" and term.token in limits.stop_words))
    ]
    if len(broad) == len(positive):
        words = ", ".join(f"'{render(term)}'" for term in sorted(broad, key=render))
        raise QueryError(
            f"query would match almost every article: {words} "
            + ("is too common on its own" if len(broad) == 1 else "are too common on their own"),
            min(positive.values()),
            f"add a more specific word; the {len(limits.stop_words)} most common English words "
            "and lang: alone are not accepted",
        )
