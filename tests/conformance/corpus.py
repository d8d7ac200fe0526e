"""Where the conformance corpora live and how their expectation headers read.

The corpora are other projects' test material (``../shared/conformance`` beside the checkout,
or ``$FEEDMESH_CONFORMANCE``); see that folder's README. Nothing here edits them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

__all__ = ["CORPUS", "Header", "available", "case_id", "read_header"]

_REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("FEEDMESH_CONFORMANCE", _REPO.parent / "shared" / "conformance"))

_COMMENT = re.compile(rb"<!--(.*?)-->", re.DOTALL)
_LINE = re.compile(r"^\s*(Description|Expect|Header|SkipUnless):\s*(.*?)\s*$", re.MULTILINE)


class Header(msgspec.Struct, frozen=True):
    """The ``Description:``/``Expect:``/``Header:`` lines of a feedparser or feedvalidator case."""

    description: str = ""
    expect: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    skip_unless: str = ""


def available() -> bool:
    return CORPUS.is_dir()


def case_id(path: Path) -> str:
    """A stable, readable test id: the path inside the corpus folder."""
    return path.relative_to(CORPUS).as_posix()


def read_header(data: bytes) -> Header:
    """The expectation comment at the top of a case (the first comment that has one)."""
    for found in _COMMENT.finditer(data[:8192]):
        text = found.group(1).decode("utf-8", errors="replace")
        lines = _LINE.findall(text)
        if not lines:
            continue
        fields: dict[str, str] = {}
        headers = []
        for name, value in lines:
            if name == "Header":
                header, _, header_value = value.partition(":")
                headers.append((header.strip().lower(), header_value.strip()))
            else:
                fields.setdefault(name.lower().replace("skipunless", "skip_unless"), value)
        return Header(description=fields.get("description", ""), expect=fields.get("expect", ""),
                      headers=tuple(headers), skip_unless=fields.get("skip_unless", ""))
    return Header()
