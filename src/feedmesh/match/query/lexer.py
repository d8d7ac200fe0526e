"""Split query text into lexemes, keeping each one's character offset for error messages.

Lexemes: ``(`` ``)``; a quoted phrase (straight or typographic quotes); ``-`` directly before a term
(exclusion); the operators ``AND`` ``OR`` ``NOT`` (any case); a field prefix (``title:`` etc.)
directly followed by its value; and raw words (anything else up to whitespace, a parenthesis or a
quote). Raw words are tokenized later by the parser, with the same tokenizer as articles.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from typing import Final

from feedmesh.match.errors import QueryError

__all__ = ["FIELD_NAMES", "Kind", "Lexeme", "lex"]

FIELD_NAMES: Final = {
    "title": "title",
    "author": "author",
    "category": "category",
    "site": "site",
    "feed": "site",  # the host of the source feed; the same thing as site:
    "lang": "lang",
}
_QUOTES: Final = '"\u201c\u201d\u201e'
_STOPPERS: Final = frozenset("()" + _QUOTES)
_OPERATORS: Final = {"and": "AND", "or": "OR", "not": "NOT"}
_FIELD_HINT: Final = "fields are title:, author:, category:, site: (or feed:) and lang:"
# Control characters that are not whitespace (category Cc), and lone surrogates (Cs).
_INVALID_CHARACTER: Final = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff]")


class Kind(enum.Enum):
    WORD = "word"
    PHRASE = "phrase"
    LPAREN = "("
    RPAREN = ")"
    AND = "AND"
    OR = "OR"
    NOT = "NOT"
    MINUS = "-"
    FIELD = "field"


class Lexeme:
    __slots__ = ("kind", "position", "text")

    def __init__(self, kind: Kind, position: int, text: str = "") -> None:
        self.kind = kind
        self.position = position
        self.text = text

    def __repr__(self) -> str:
        return f"Lexeme({self.kind.name}, {self.position}, {self.text!r})"


def _check_characters(text: str) -> None:
    invalid = _INVALID_CHARACTER.search(text)
    if invalid is None:
        return
    char, position = invalid.group(), invalid.start()
    category = unicodedata.category(char)
    if category == "Cc":
        raise QueryError(
            f"unexpected control character U+{ord(char):04X}",
            position,
            "remove it; queries are plain text",
        )
    if category == "Cs":
        raise QueryError(
            f"invalid character U+{ord(char):04X} (a lone surrogate)",
            position,
            "the text is not valid Unicode; retype this character",
        )


def lex(text: str) -> list[Lexeme]:
    """The lexemes of ``text``; raises :class:`QueryError` on a malformed token."""
    _check_characters(text)
    lexemes: list[Lexeme] = []
    length = len(text)
    index = 0
    while index < length:
        char = text[index]
        if char.isspace():
            index += 1
            continue
        if char == "(":
            lexemes.append(Lexeme(Kind.LPAREN, index))
            index += 1
        elif char == ")":
            lexemes.append(Lexeme(Kind.RPAREN, index))
            index += 1
        elif char in _QUOTES:
            index = _lex_phrase(text, index, lexemes)
        elif char == "-":
            following = text[index + 1] if index + 1 < length else ""
            if following == "-":
                raise QueryError(
                    "'--' is not an operator", index, "use a single '-' (or NOT) to exclude a word"
                )
            if not following or following.isspace() or following == ")":
                raise QueryError(
                    "'-' has nothing to exclude", index, "write the word right after it: -word"
                )
            lexemes.append(Lexeme(Kind.MINUS, index))
            index += 1
        else:
            index = _lex_word(text, index, lexemes)
    return lexemes


def _lex_phrase(text: str, start: int, lexemes: list[Lexeme]) -> int:
    index = start + 1
    while index < len(text) and text[index] not in _QUOTES:
        index += 1
    if index >= len(text):
        raise QueryError("unclosed quote", start, 'add a closing \'"\' after the phrase')
    lexemes.append(Lexeme(Kind.PHRASE, start, text[start + 1 : index]))
    return index + 1


def _lex_word(text: str, start: int, lexemes: list[Lexeme]) -> int:
    index = start
    while index < len(text) and not text[index].isspace() and text[index] not in _STOPPERS:
        index += 1
    raw = text[start:index]
    operator = _OPERATORS.get(raw.lower())
    if operator is not None:
        lexemes.append(Lexeme(Kind[operator], start, raw))
        return index
    colon = raw.find(":")
    name = raw[:colon]
    if colon > 0 and name.isascii() and name.isalpha():
        field = FIELD_NAMES.get(name.lower())
        value = raw[colon + 1 :]
        if field is None:
            if value.startswith("/"):  # a pasted URL ("http://..."): search its words
                lexemes.append(Lexeme(Kind.WORD, start, raw))
                return index
            raise QueryError(
                f"unknown field '{name}:'",
                start,
                f"{_FIELD_HINT}; to search for the text itself, put it in quotes",
            )
        lexemes.append(Lexeme(Kind.FIELD, start, field))
        if value:
            lexemes.append(Lexeme(Kind.WORD, start + colon + 1, value))
        elif index >= len(text) or text[index].isspace() or text[index] == ")":
            raise QueryError(
                f"field '{name}:' needs a value",
                start + colon + 1,
                f"write the value right after the colon: {name}:word, {name}:\"a phrase\" "
                f"or {name}:(a OR b)",
            )
        return index
    lexemes.append(Lexeme(Kind.WORD, start, raw))
    return index
