"""The query tree and its canonical text (the *normalized form*).

Leaves are terms restricted to one field (``text`` unless the query named another):

* :class:`Word` - a token (``law``), or for ``site``/``lang`` a host or language tag;
* :class:`Prefix` - a token prefix (``copyr*``);
* :class:`Phrase` - consecutive tokens (``"net neutrality"``; also a word the tokenizer splits, such
  as ``3.14`` or ``東京``);
* :class:`Compound` - a hyphenated word (``e-mail``): true when its parts occur as a phrase or when
  the joined form (``email``) occurs.

Inner nodes are :class:`And`, :class:`Or` and :class:`Not`. The ``make_*`` constructors keep the
tree canonical: nested ANDs/ORs are flattened, duplicates dropped, children sorted (negations last),
and double negation removed. :func:`render` prints a canonical tree, so two queries that differ only
in case, spacing, operator spelling, term order or duplicates get the same normalized string, and
parsing that string gives it back unchanged.
"""

from __future__ import annotations

from typing import Final, TypeAlias

import msgspec

__all__ = [
    "FIELDS",
    "OPERATOR_WORDS",
    "And",
    "Compound",
    "Node",
    "Not",
    "Or",
    "Phrase",
    "Prefix",
    "Term",
    "Word",
    "make_and",
    "make_not",
    "make_or",
    "render",
]

FIELDS: Final = ("text", "title", "author", "category", "site", "lang")
"""Field names as stored; ``text`` is the default and is never written out."""

OPERATOR_WORDS: Final = frozenset({"and", "or", "not"})
"""Operators are recognized in any case, so these words must be quoted to be searched for."""


class Word(msgspec.Struct, frozen=True, tag="word"):
    field: str
    token: str


class Prefix(msgspec.Struct, frozen=True, tag="prefix"):
    field: str
    prefix: str


class Phrase(msgspec.Struct, frozen=True, tag="phrase"):
    field: str
    tokens: tuple[str, ...]


class Compound(msgspec.Struct, frozen=True, tag="compound"):
    field: str
    parts: tuple[str, ...]

    @property
    def joined(self) -> str:
        return "".join(self.parts)


class Not(msgspec.Struct, frozen=True, tag="not"):
    child: Node


class And(msgspec.Struct, frozen=True, tag="and"):
    children: tuple[Node, ...]


class Or(msgspec.Struct, frozen=True, tag="or"):
    children: tuple[Node, ...]


Term: TypeAlias = Word | Prefix | Phrase
Node: TypeAlias = Word | Prefix | Phrase | Compound | Not | And | Or


def _field_prefix(field: str) -> str:
    return "" if field == "text" else field + ":"


def _quote_if_operator(token: str) -> str:
    return f'"{token}"' if token in OPERATOR_WORDS else token


def render(node: Node) -> str:
    """The canonical text of a canonical tree (see the module docstring)."""
    if isinstance(node, Word):
        return _field_prefix(node.field) + _quote_if_operator(node.token)
    if isinstance(node, Prefix):
        return f"{_field_prefix(node.field)}{node.prefix}*"
    if isinstance(node, Phrase):
        return f'{_field_prefix(node.field)}"{" ".join(node.tokens)}"'
    if isinstance(node, Compound):
        return _field_prefix(node.field) + "-".join(node.parts)
    if isinstance(node, Not):
        inner = render(node.child)
        return f"NOT ({inner})" if isinstance(node.child, (And, Or)) else f"NOT {inner}"
    if isinstance(node, And):
        return " AND ".join(
            f"({render(child)})" if isinstance(child, Or) else render(child)
            for child in node.children
        )
    if isinstance(node, Or):
        return " OR ".join(
            f"({render(child)})" if isinstance(child, And) else render(child)
            for child in node.children
        )
    raise TypeError(f"not a query node: {node!r}")


def _sort_key(node: Node) -> tuple[bool, str]:
    return (isinstance(node, Not), render(node))


def _canonical_children(children: list[Node], kind: type[And] | type[Or]) -> tuple[Node, ...]:
    flat: dict[str, Node] = {}
    for child in children:
        for grandchild in child.children if isinstance(child, kind) else (child,):
            flat.setdefault(render(grandchild), grandchild)
    return tuple(sorted(flat.values(), key=_sort_key))


def make_and(children: list[Node]) -> Node:
    unique = _canonical_children(children, And)
    return unique[0] if len(unique) == 1 else And(unique)


def make_or(children: list[Node]) -> Node:
    unique = _canonical_children(children, Or)
    return unique[0] if len(unique) == 1 else Or(unique)


def make_not(child: Node) -> Node:
    return child.child if isinstance(child, Not) else Not(child)
