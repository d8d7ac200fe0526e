"""Credentials in feed URLs (``https://user:secret@host/feed``) are needed to fetch, and must
never be shown: not in a source list, an error message, a log line or an export."""

from __future__ import annotations

import re

__all__ = ["redact_credentials"]

# scheme://userinfo@ where userinfo holds a password (user:password); the user name alone is kept
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/?#@\s:]*):"
                       r"(?P<password>[^/?#@\s]*)@")


def redact_credentials(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    if "@" not in text:
        return text
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
