"""Text normalization and tokenization, shared by queries and articles.

A query word matches an article only if both went through *the same* function, so this module is the
single place that decides what a token is:

1. **Entities and Unicode.** HTML entities are decoded (``&amp;`` -> ``&``), then the text is NFKC
   normalized and case-folded (``Straße`` -> ``strasse``, fullwidth ``ＡＢＣ`` -> ``abc``, ligatures
   split), and normalized again because case folding can undo NFKC.
2. **Look-alikes.** Typographic apostrophes become ``'``; Unicode hyphens become ``-``; soft hyphens
   and zero-width characters are removed; decimal digits of every script become ASCII digits
   (``٢٠٢٤`` -> ``2024``).
3. **Apostrophes.** A possessive ``'s`` is dropped (``Obama's`` -> ``obama``) and an apostrophe
   between letters disappears (``don't`` -> ``dont``, ``O'Reilly`` -> ``oreilly``).
4. **Digits.** A thousands separator is dropped (``1,000`` -> ``1000``); other punctuation between
   digits separates tokens (``3.14`` -> ``3`` ``14``; a query ``3.14`` becomes the phrase "3 14").
5. **Tokens** are maximal runs of letters, marks and digits. Scripts written without spaces (Han,
   Hiragana, Katakana, Hangul, Thai, Lao, Khmer, Myanmar) give one token per character (with its
   combining marks), so a query word in those scripts becomes a phrase of characters and matches
   wherever that character sequence occurs.
6. **Hyphens** separate tokens (``e-mail`` -> ``e`` ``mail``), and a hyphenated compound also yields
   its parts joined as an *alias* (``email``) that counts for word presence but has no position.

No accent folding is done: ``resume`` and ``résumé`` stay different, as they are in many languages.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Final

import regex

__all__ = [
    "STOP_WORDS",
    "TokenRun",
    "html_to_text",
    "normalize_text",
    "tokenize",
]

STOP_WORDS: Final[frozenset[str]] = frozenset(
    # The 29 most frequent English words of wordfreq's list (Cobra excluded "the top 29 most popular
    # words"); tests/match/test_text.py checks that this matches wordfreq.top_n_list("en", 29).
    ("the", "to", "and", "of", "a", "in", "i", "is", "for", "that", "you", "it", "on", "with",
     "this", "was", "be", "as", "are", "have", "at", "he", "not", "by", "but", "from", "my", "or",
     "we")
)

# Scripts written without spaces between words: one token per character.
_SPLIT_SCRIPTS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
_IS_SPLIT_SCRIPT = regex.compile(rf"[{_SPLIT_SCRIPTS}]")
_BMP_END = 0x10000

# One set of rules, three implementations, fastest first (tests check that they agree):
# * ASCII text: tiny `re` patterns;
# * text in the Basic Multilingual Plane: `re` patterns whose character sets are generated from
#   `unicodedata` (sre compiles them to bitmaps, fast);
# * text that still has astral word characters (CJK extension B and later, historic scripts) after
#   astral symbols and emoji became spaces: the same patterns generated over every plane (sre scans
#   those sets linearly, several times slower; such text is rare).
# Character classes come from `unicodedata` only (the running Python's Unicode version), so all
# three agree; the `regex` module contributes the script names, which `unicodedata` lacks.
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
_ASCII_COMPOUND = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")
_ASCII_POSSESSIVE = re.compile(r"(?<=[a-z0-9])'s(?![a-z0-9])")
_ASCII_INNER_APOSTROPHE = re.compile(r"(?<=[a-z0-9])'(?=[a-z0-9])")
_THOUSANDS_COMMA = re.compile(r"(?<=[0-9]),(?=[0-9]{3}(?![0-9]))")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")

# Look-alike characters replaced before tokenizing. The separators (dashes, quotes, bullets) are not
# word characters either way; turning them into spaces lets most English text take the ASCII path.
_LOOKALIKE_REPLACEMENTS: Final = (
    *((apostrophe, "'") for apostrophe in "\u2018\u2019\u02bc\u02b9\u2032\uff07"),
    *((hyphen, "-") for hyphen in "\u2010\u2011"),
    *((invisible, "") for invisible in "\u00ad\u200b\u200c\u200d\u2060\ufeff"),
    *((separator, " ") for separator in "\u2012\u2013\u2014\u2015\u201c\u201d\u201e\u00ab\u00bb"
      "\u2022\u00b7\u2026\u00a0\u2039\u203a\u00a9\u00ae\u2122\u00b0"),
)


class _Tables:
    """Token patterns for code points below ``end``, generated once from ``unicodedata``."""

    def __init__(self, end: int) -> None:
        word: list[int] = []
        split: list[int] = []
        marks: list[int] = []
        self.digits: dict[int, int] = {}
        for code_point in range(0x80, end):
            char = chr(code_point)
            category = unicodedata.category(char)
            if category == "Nd":
                self.digits[code_point] = ord("0") + unicodedata.digit(char)
            if category[0] not in "LMN":
                continue
            if category[0] == "M":
                marks.append(code_point)
            if _IS_SPLIT_SCRIPT.match(char):
                if category[0] != "M":
                    split.append(code_point)
            else:
                word.append(code_point)
        run = "[a-z0-9" + _char_class(word) + "]"
        self.token = re.compile(f"[{_char_class(split)}][{_char_class(marks)}]*|{run}+")
        self.compound = re.compile(f"{run}+(?:-{run}+)+")
        any_word = "[a-z0-9" + _char_class(word + split + marks) + "]"
        self.possessive = re.compile(f"(?<={any_word})'s(?!{any_word})")
        self.inner_apostrophe = re.compile(f"(?<={any_word})'(?={any_word})")
        self.non_ascii_digit = re.compile(f"[{_char_class(list(self.digits))}]")


def _char_class(code_points: list[int]) -> str:
    """A regular-expression character set body for ``code_points`` (sorted ranges)."""
    parts: list[str] = []
    code_points = sorted(set(code_points))
    index = 0
    while index < len(code_points):
        start = end = code_points[index]
        while index + 1 < len(code_points) and code_points[index + 1] == end + 1:
            index += 1
            end = code_points[index]
        parts.append(
            re.escape(chr(start)) if start == end
            else f"{re.escape(chr(start))}-{re.escape(chr(end))}"
        )
        index += 1
    return "".join(parts)


_tables: dict[int, _Tables] = {}


def _tables_for(end: int) -> _Tables:
    # Built on first need, not at import: ~50 ms for the BMP, ~0.5 s for every plane.
    tables = _tables.get(end)
    if tables is None:
        tables = _tables[end] = _Tables(end)
    return tables


def _has_astral(text: str) -> bool:
    # UTF-16 needs two units for every character outside the BMP; encoding is far faster than a
    # scan.
    return len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)


def _astral_replacement(match: re.Match[str]) -> str:
    """An astral digit becomes ASCII, an astral letter or mark stays, anything else is a space."""
    char = match.group()
    category = unicodedata.category(char)
    if category == "Nd":
        return str(unicodedata.digit(char))
    return char if category[0] in "LMN" else " "


def normalize_text(text: str) -> str:
    """Steps 1-2 of the module docstring: entities, NFKC, case folding, look-alike characters."""
    if "&" in text:
        text = html.unescape(text)
    if text.isascii():
        return text.lower()  # ASCII is NFKC-stable, and its case folding is lower()
    text = unicodedata.normalize("NFKC", text).casefold()
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    for lookalike, replacement in _LOOKALIKE_REPLACEMENTS:
        if lookalike in text:
            text = text.replace(lookalike, replacement)
    if text.isascii():
        return text
    if _has_astral(text):  # emoji and other astral symbols: spaces (they separate words anyway)
        text = _ASTRAL.sub(_astral_replacement, text)
    tables = _tables_for(_BMP_END)
    if tables.non_ascii_digit.search(text):
        text = text.translate(tables.digits)
    return text


class TokenRun:
    """The tokens of one piece of text, in order, plus the aliases of its hyphenated compounds."""

    __slots__ = ("aliases", "tokens")

    def __init__(self, tokens: list[str], aliases: list[str]) -> None:
        self.tokens = tokens
        self.aliases = aliases

    def __repr__(self) -> str:
        return f"TokenRun(tokens={self.tokens!r}, aliases={self.aliases!r})"


def tokenize(text: str) -> TokenRun:
    """Normalize ``text`` and split it into tokens (see the module docstring for the rules)."""
    text = normalize_text(text)
    if text.isascii():
        if "'" in text:
            text = _ASCII_INNER_APOSTROPHE.sub("", _ASCII_POSSESSIVE.sub("", text))
        if "," in text:
            text = _THOUSANDS_COMMA.sub("", text)
        tokens = _ASCII_TOKEN.findall(text)
        aliases = (
            [m.replace("-", "") for m in _ASCII_COMPOUND.findall(text)] if "-" in text else []
        )
        return TokenRun(tokens, aliases)
    return _tokenize_with(text, _tables_for(0x110000 if _has_astral(text) else _BMP_END))


def _tokenize_with(text: str, tables: _Tables) -> TokenRun:
    if "'" in text:
        text = tables.inner_apostrophe.sub("", tables.possessive.sub("", text))
    if "," in text:
        text = _THOUSANDS_COMMA.sub("", text)
    tokens = tables.token.findall(text)
    aliases = [m.replace("-", "") for m in tables.compound.findall(text)] if "-" in text else []
    return TokenRun(tokens, aliases)


# --- HTML to text -------------------------------------------------------------------------------

# Tags that sit inside a word ("<b>W</b>ord") are removed without a space; every other tag
# separates.
_INLINE_TAGS: Final = frozenset(
    ("a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "font", "i", "ins", "kbd",
     "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u",
     "var", "wbr")
)
_INVISIBLE_BLOCKS = re.compile(
    r"<!--.*?(?:-->|$)|<(script|style|template)\b[^>]*>.*?(?:</\1\s*>|$)", re.IGNORECASE | re.DOTALL
)
_TAG = re.compile(r"<\s*/?\s*([a-zA-Z][a-zA-Z0-9]*)[^>]*>|<![^>]*>|<\?[^>]*>")


def _replace_tag(match: re.Match[str]) -> str:
    name = match.group(1)
    return "" if name is not None and name.lower() in _INLINE_TAGS else " "


def html_to_text(markup: str) -> str:
    """Plain text of an HTML fragment: comments/scripts dropped, tags removed, entities decoded."""
    if "<" in markup:
        markup = _INVISIBLE_BLOCKS.sub(" ", markup)
        markup = _TAG.sub(_replace_tag, markup)
    if "&" in markup:
        markup = html.unescape(markup)
    return markup
