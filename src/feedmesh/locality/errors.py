"""The one exception of the locality package.

::

    ValueError
     └── LocalityError        bad input: a feed URL, a latency matrix, an assignment request
"""

from __future__ import annotations

from feedmesh.errors import FeedmeshError

__all__ = ["LocalityError"]


class LocalityError(FeedmeshError, ValueError):
    """Input the mapping cannot use; the message says what, where and why."""
