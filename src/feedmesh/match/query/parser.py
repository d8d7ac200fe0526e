"""Recursive-descent parser: lexemes -> a tree whose nodes remember where they were written.

Grammar (``NOT``/``-`` bind tightest, then AND, implicit between adjacent terms, then OR)::

    query   := or EOF
    or      := and ("OR" and)*
    and     := unary (["AND"] unary)*
    unary   := ("NOT" | "-") unary | primary
    primary := "(" or ")" | FIELD value | WORD | PHRASE
    value   := WORD | PHRASE | "(" or ")"        (every term inside takes the field)

The positioned tree (:class:`Positioned`) feeds the OR expansion and its checks, which must point at
the offending term; :func:`canonical` turns it into the position-free tree of :mod:`.ast`.
"""

from __future__ import annotations

from typing import Final

from feedmesh.match.article import normalize_host, normalize_language
from feedmesh.match.errors import QueryError
from feedmesh.match.query.ast import (
    Compound,
    Node,
    Phrase,
    Prefix,
    Word,
    make_and,
    make_not,
    make_or,
)
from feedmesh.match.query.lexer import Kind, Lexeme, lex
from feedmesh.match.query.limits import QueryLimits
from feedmesh.match.text import tokenize

__all__ = ["Positioned", "canonical", "parse_tree"]

_STARTS_UNARY: Final = frozenset(
    {Kind.WORD, Kind.PHRASE, Kind.LPAREN, Kind.NOT, Kind.MINUS, Kind.FIELD}
)
_NOT_AN_OPERATOR: Final = {"&&": "AND", "&": "AND", "||": "OR", "|": "OR", "!": "NOT", "~": "NOT"}


class Positioned:
    """A node of the parse tree: ``kind`` is ``term``, ``not``, ``and`` or ``or``."""

    __slots__ = ("children", "kind", "position", "term")

    def __init__(
        self,
        kind: str,
        position: int,
        children: list[Positioned] | None = None,
        term: Word | Prefix | Phrase | Compound | None = None,
    ) -> None:
        self.kind = kind
        self.position = position
        self.children = children or []
        self.term = term


def canonical(node: Positioned) -> Node:
    """The canonical (flattened, sorted, deduplicated) tree for ``node``."""
    if node.kind == "term":
        assert node.term is not None
        return node.term
    if node.kind == "not":
        return make_not(canonical(node.children[0]))
    children = [canonical(child) for child in node.children]
    return make_and(children) if node.kind == "and" else make_or(children)


def parse_tree(text: str, limits: QueryLimits) -> Positioned:
    """Parse ``text`` into a positioned tree, or raise :class:`QueryError`."""
    if len(text) > limits.max_chars:
        raise QueryError(
            f"query too long: {len(text)} > {limits.max_chars} characters",
            limits.max_chars,
            "shorten the query, or split it into several subscriptions",
        )
    lexemes = lex(text)
    if not lexemes:
        raise QueryError("empty query", 0, "type at least one word to search for")
    return _Parser(text, lexemes, limits).parse()


class _Parser:
    def __init__(self, text: str, lexemes: list[Lexeme], limits: QueryLimits) -> None:
        self.text = text
        self.lexemes = lexemes
        self.limits = limits
        self.index = 0
        self.terms = 0

    # --- helpers -------------------------------------------------------------------------------

    def peek(self) -> Lexeme | None:
        return self.lexemes[self.index] if self.index < len(self.lexemes) else None

    def take(self) -> Lexeme:
        lexeme = self.lexemes[self.index]
        self.index += 1
        return lexeme

    def end_position(self) -> int:
        return len(self.text)

    def require_operand(self, operator: Lexeme, what: str) -> None:
        following = self.peek()
        if following is None or following.kind not in _STARTS_UNARY:
            where = following.position if following is not None else self.end_position()
            raise QueryError(
                f"{operator.text.upper() or operator.kind.value} {what}",
                operator.position,
                f"put a word after it (found {_describe(following)} at {where})",
            )

    # --- grammar -------------------------------------------------------------------------------

    def parse(self) -> Positioned:
        first = self.peek()
        if first is not None and first.kind in (Kind.AND, Kind.OR):
            raise QueryError(
                f"{first.text.upper()} has nothing on its left",
                first.position,
                "start the query with a word",
            )
        tree = self.parse_or(depth=0, field="text")
        leftover = self.peek()
        if leftover is not None:  # only a ')' can stop the top-level OR early
            raise QueryError(
                "unbalanced parenthesis",
                leftover.position,
                "this ')' has no matching '('; remove it or add '(' before it",
            )
        return tree

    def parse_or(self, depth: int, field: str) -> Positioned:
        start = self.peek()
        children = [self.parse_and(depth, field)]
        while (lexeme := self.peek()) is not None and lexeme.kind is Kind.OR:
            self.take()
            self.require_operand(lexeme, "has nothing on its right")
            children.append(self.parse_and(depth, field))
        position = start.position if start is not None else 0
        return children[0] if len(children) == 1 else Positioned("or", position, children)

    def parse_and(self, depth: int, field: str) -> Positioned:
        start = self.peek()
        children = [self.parse_unary(depth, field)]
        while (lexeme := self.peek()) is not None:
            if lexeme.kind is Kind.AND:
                self.take()
                self.require_operand(lexeme, "has nothing on its right")
            elif lexeme.kind not in _STARTS_UNARY:
                break
            children.append(self.parse_unary(depth, field))
        position = start.position if start is not None else 0
        return children[0] if len(children) == 1 else Positioned("and", position, children)

    def parse_unary(self, depth: int, field: str) -> Positioned:
        lexeme = self.peek()
        if lexeme is not None and lexeme.kind in (Kind.NOT, Kind.MINUS):
            self.check_depth(lexeme, depth)
            self.take()
            self.require_operand(lexeme, "has nothing to negate")
            return Positioned("not", lexeme.position, [self.parse_unary(depth + 1, field)])
        return self.parse_primary(depth, field)

    def parse_primary(self, depth: int, field: str) -> Positioned:
        lexeme = self.peek()
        if lexeme is None:  # require_operand() guarantees an operand; this is the empty group
            raise QueryError("query ends too early", self.end_position(), "finish the query")
        if lexeme.kind is Kind.LPAREN:
            return self.parse_group(depth, field)
        if lexeme.kind is Kind.FIELD:
            self.take()
            if field != "text" and lexeme.text != field:
                raise QueryError(
                    f"field '{lexeme.text}:' inside '{field}:(...)'",
                    lexeme.position,
                    "a term can be in one field only; move it out of the parentheses",
                )
            value = self.peek()
            if value is not None and value.kind is Kind.WORD and value.text.startswith("-"):
                raise QueryError(
                    "'-' after a field",
                    value.position,
                    f"put the '-' before the field to exclude: -{lexeme.text}:{value.text[1:]}",
                )
            return self.parse_primary(depth, lexeme.text)
        if lexeme.kind is Kind.WORD:
            self.take()
            return self.term(self.word_term(lexeme, field), lexeme)
        if lexeme.kind is Kind.PHRASE:
            self.take()
            return self.term(self.phrase_term(lexeme, field), lexeme)
        if lexeme.kind is Kind.RPAREN:
            raise QueryError(
                "unbalanced parenthesis",
                lexeme.position,
                "this ')' has no matching '('; remove it or add '(' before it",
            )
        raise QueryError(  # AND / OR where a term should be
            f"{lexeme.text.upper()} follows another operator",
            lexeme.position,
            "remove one of the two operators",
        )

    def parse_group(self, depth: int, field: str) -> Positioned:
        opening = self.take()
        self.check_depth(opening, depth)
        following = self.peek()
        if following is not None and following.kind is Kind.RPAREN:
            raise QueryError("empty parentheses", opening.position,
                             "put a word inside, or remove them")
        if following is None:
            raise QueryError(
                "unbalanced parenthesis", opening.position, "this '(' is never closed; add ')'"
            )
        if following.kind in (Kind.AND, Kind.OR):
            raise QueryError(
                f"{following.text.upper()} has nothing on its left",
                following.position,
                "start the group with a word",
            )
        inner = self.parse_or(depth + 1, field)
        closing = self.peek()
        if closing is None or closing.kind is not Kind.RPAREN:
            raise QueryError(
                "unbalanced parenthesis", opening.position, "this '(' is never closed; add ')'"
            )
        self.take()
        return inner

    def check_depth(self, lexeme: Lexeme, depth: int) -> None:
        if depth >= self.limits.max_depth:
            raise QueryError(
                f"nesting too deep: more than {self.limits.max_depth} levels",
                lexeme.position,
                "remove redundant parentheses or NOTs",
            )

    # --- terms ---------------------------------------------------------------------------------

    def term(self, term: Word | Prefix | Phrase | Compound, lexeme: Lexeme) -> Positioned:
        self.terms += 1
        if self.terms > self.limits.max_terms:
            raise QueryError(
                f"too many terms: more than {self.limits.max_terms}",
                lexeme.position,
                "split the query into several subscriptions",
            )
        return Positioned("term", lexeme.position, term=term)

    def word_term(self, lexeme: Lexeme, field: str) -> Word | Prefix | Phrase | Compound:
        raw, position = lexeme.text, lexeme.position
        if field in ("site", "lang"):
            return self.field_value(raw, position, field)
        star = raw.find("*")
        if star >= 0:
            return self.prefix_term(raw, position, star, field)
        run = tokenize(raw)
        if not run.tokens:
            operator = _NOT_AN_OPERATOR.get(raw)
            hint = (
                f"use {operator} instead" if operator else "use letters or digits; put punctuation "
                "inside a phrase only if it separates words"
            )
            raise QueryError(f"'{raw}' has no letters or digits to search for", position, hint)
        if len(run.tokens) == 1:
            return Word(field, run.tokens[0])
        if run.aliases == ["".join(run.tokens)]:
            return Compound(field, tuple(run.tokens))
        return self.checked_phrase(field, run.tokens, position)

    def prefix_term(self, raw: str, position: int, star: int, field: str) -> Prefix:
        if star != len(raw) - 1:
            raise QueryError(
                "wildcard '*' must end the word",
                position + star,
                "only prefixes are supported: copyr* matches copyright, copyrights, ...",
            )
        run = tokenize(raw[:-1])
        if len(run.tokens) != 1:
            raise QueryError(
                "a wildcard needs exactly one word before '*'",
                position,
                "write a single word followed by '*', e.g. copyr*",
            )
        prefix = run.tokens[0]
        if len(prefix) < self.limits.min_prefix_chars:
            raise QueryError(
                f"wildcard prefix too short: '{prefix}*' has fewer than "
                f"{self.limits.min_prefix_chars} characters",
                position,
                "a short prefix matches a large part of the vocabulary; type more of the word",
            )
        return Prefix(field, prefix)

    def field_value(self, raw: str, position: int, field: str) -> Word:
        if "*" in raw:
            raise QueryError(
                f"{field}: does not take wildcards", position + raw.index("*"),
                f"give a full {field}"
            )
        if field == "site":
            host = normalize_host(raw)
            if host is None:
                raise QueryError(
                    f"'{raw}' is not a host name", position,
                    "site: takes a host, e.g. site:bbc.co.uk"
                )
            return Word("site", host)
        language = normalize_language(raw)
        if language is None:
            raise QueryError(
                f"'{raw}' is not a language tag", position, "lang: takes a tag such as en or pt-br"
            )
        return Word("lang", language)

    def phrase_term(self, lexeme: Lexeme, field: str) -> Word | Phrase:
        if field in ("site", "lang"):
            raise QueryError(
                f"{field}: does not take a phrase", lexeme.position, f"give a single {field} value"
            )
        star = lexeme.text.find("*")
        if star >= 0:
            raise QueryError(
                "wildcard inside a phrase",
                lexeme.position + 1 + star,
                "wildcards work on single words only; remove the '*'",
            )
        run = tokenize(lexeme.text)
        if not run.tokens:
            raise QueryError(
                "empty phrase", lexeme.position, "put words between the quotes, or remove them"
            )
        if len(run.tokens) == 1:
            return Word(field, run.tokens[0])
        return self.checked_phrase(field, run.tokens, lexeme.position)

    def checked_phrase(self, field: str, tokens: list[str], position: int) -> Phrase:
        if len(tokens) > self.limits.max_phrase_words:
            raise QueryError(
                f"phrase too long: {len(tokens)} > {self.limits.max_phrase_words} words",
                position,
                "shorten the phrase, or search for its words without quotes",
            )
        return Phrase(field, tuple(tokens))


def _describe(lexeme: Lexeme | None) -> str:
    if lexeme is None:
        return "the end of the query"
    if lexeme.kind in (Kind.AND, Kind.OR, Kind.NOT):
        return lexeme.kind.value
    return f"'{lexeme.kind.value}'"
