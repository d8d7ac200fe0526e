"""The reference evaluator: a query tree evaluated directly on a tokenized article.

It is deliberately simple and independent of the index (no DNF, no term ids, no access predicates),
so that property tests can check the index against it. It is also cheap enough for the web UI's
preview, which matches one query against the most recent entries.
"""

from __future__ import annotations

from feedmesh.match.article import TokenizedArticle
from feedmesh.match.query.ast import And, Compound, Node, Not, Or, Phrase, Prefix, Word

__all__ = ["contains_phrase", "evaluate", "matched_terms"]


def contains_phrase(sequence: list[str], tokens: tuple[str, ...]) -> bool:
    """True when ``tokens`` occur consecutively in ``sequence``."""
    width = len(tokens)
    first = tokens[0]
    start = 0
    last_start = len(sequence) - width
    while start <= last_start:
        try:
            start = sequence.index(first, start, last_start + 1)
        except ValueError:
            return False
        if all(sequence[start + k] == tokens[k] for k in range(1, width)):
            return True
        start += 1
    return False


def evaluate(node: Node, article: TokenizedArticle) -> bool:
    """Whether ``article`` satisfies the query tree ``node``."""
    if isinstance(node, Word):
        return node.token in article.token_set(node.field)
    if isinstance(node, Prefix):
        prefix = node.prefix
        return any(token.startswith(prefix) for token in article.token_set(node.field))
    if isinstance(node, Phrase):
        return contains_phrase(article.sequences[node.field], node.tokens)
    if isinstance(node, Compound):
        return node.joined in article.token_set(node.field) or contains_phrase(
            article.sequences[node.field], node.parts
        )
    if isinstance(node, Not):
        return not evaluate(node.child, article)
    if isinstance(node, And):
        return all(evaluate(child, article) for child in node.children)
    if isinstance(node, Or):
        return any(evaluate(child, article) for child in node.children)
    raise TypeError(f"not a query node: {node!r}")


def matched_terms(node: Node, article: TokenizedArticle) -> list[str]:
    """The terms of the query's positive side (not under NOT) that ``article`` holds, as a
    person would read them (``word``, ``prefix*``, ``"a phrase"``), in query order, once each:
    why an entry matched."""
    found: dict[str, None] = {}

    def visit(each: Node) -> None:
        # Only what holds explains the match: an alternative that failed highlights nothing.
        if isinstance(each, Not) or not evaluate(each, article):
            return
        if isinstance(each, And | Or):
            for child in each.children:
                visit(child)
            return
        if isinstance(each, Word):
            found[each.token] = None
        elif isinstance(each, Prefix):
            found[f"{each.prefix}*"] = None
        elif isinstance(each, Phrase):
            found[f'"{" ".join(each.tokens)}"'] = None
        elif isinstance(each, Compound):
            found[f'"{" ".join(each.parts)}"'] = None

    visit(node)
    return list(found)
