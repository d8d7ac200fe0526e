"""RFC 8785 JSON canonicalization (JCS): the one byte form a record is signed in.

The work is done by ``rfc8785`` (Trail of Bits' implementation, tested against the RFC's own
vectors in ``tests/mesh/records/test_canonical.py``). This module only names the errors: a value
JSON cannot carry exactly (NaN, an integer beyond 2**53, a non-string key) is a
:class:`NotCanonicalizable` saying what and why, never a bare library exception.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

__all__ = ["NotCanonicalizable", "canonical_bytes", "is_canonical"]


class NotCanonicalizable(ValueError):
    """The value has no RFC 8785 form (it is not I-JSON)."""


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 bytes of ``value`` (UTF-8, keys sorted by UTF-16 units, ES6 numbers)."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as error:
        raise NotCanonicalizable(f"cannot canonicalize {type(value).__name__}: {error}") from error


def is_canonical(data: bytes) -> tuple[bool, Any]:
    """Parse ``data`` as JSON and say whether it is already in canonical form.

    Returns ``(ok, value)``; ``value`` is None when ``data`` is not JSON at all."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return False, None
    try:
        return canonical_bytes(value) == data, value
    except NotCanonicalizable:
        return False, value
