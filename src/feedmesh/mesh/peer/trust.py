"""Whose signed records a peer accepts for a feed it follows (SCRIBE-RSS 4.2 and 4.3.2).

A followed feed's HTTP document names, in its ``<subscribe>`` element, the key that starts the
feed's log: the publisher's own key, or (``republication="true"``) a republisher's. Two policies:

* ``first-use`` (the default): the key the element names the first time the peer reads it is
  accepted and *pinned* (``DATA/pinned-keys.json``). The person chose to follow that URL, so the
  document is as trusted as any poll of it; pinning means a later document naming another key
  (a hijacked server, someone in the middle) is refused and logged, not followed silently. Key
  rotation does not change the element's key (rotations travel in the log itself, signed by the
  old key), so a changed key is always worth a look.
* ``listed``: a republisher's key is accepted only if the person listed it (``--trust-key``);
  a publisher's own key (``republication="false"``) is still accepted on first use, since it
  comes from the publisher's own document.

``first-use`` is the default because the peer follows a republisher's feed only when the person
subscribed to that feed's URL: asking them for a key as well would add a step that protects
nothing the URL does not already. ``listed`` is for someone who wants to decide per republisher.

Pure apart from :class:`PinnedKeys`' file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from feedmesh.model import MeshSubscribe

__all__ = ["TRUST_POLICIES", "PinnedKeys", "TrustSettings", "decide"]

TRUST_POLICIES = ("first-use", "listed")


@dataclass(frozen=True)
class TrustSettings:
    policy: str = "first-use"
    listed: frozenset[str] = frozenset()
    """Republisher keys (base64) accepted under the ``listed`` policy."""

    def __post_init__(self) -> None:
        if self.policy not in TRUST_POLICIES:
            raise ValueError(f"trust policy must be one of {', '.join(TRUST_POLICIES)}, "
                             f"got {self.policy!r}")


def decide(settings: TrustSettings, element: MeshSubscribe, pinned: str | None) -> str | None:
    """None: follow the log ``element`` names; else why not (one line)."""
    key = element.public_key
    if pinned is not None and pinned != key:
        return (f"the feed now names key {key[:12]}..., the key pinned at first use is "
                f"{pinned[:12]}...; remove the feed from pinned-keys.json to accept the new one")
    if element.republication and settings.policy == "listed" and key not in settings.listed:
        return f"republisher key {key[:12]}... is not listed (--trust-key)"
    return None


class PinnedKeys:
    """``{feed URL: key}`` pinned at first use, kept in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            loaded = json.loads(path.read_text())
            self.keys: dict[str, str] = {str(k): str(v) for k, v in loaded.items()}
        except (OSError, ValueError, AttributeError):
            self.keys = {}

    def get(self, feed: str) -> str | None:
        return self.keys.get(feed)

    def pin(self, feed: str, key: str) -> None:
        if self.keys.get(feed) == key:
            return
        self.keys[feed] = key
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.keys, indent=1, sort_keys=True))
        os.replace(temporary, self.path)
