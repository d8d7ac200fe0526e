"""The SCRIBE-RSS ``<subscribe>`` element (issue 14; section 4.2 of the paper): a feed says its
updates are also multicast, signed, on the mesh, and with which key. A client bootstraps with one
ordinary HTTP fetch of the feed.

RSS 2.0 (in ``<channel>``) and Atom (in ``<feed>``), namespace :data:`NAMESPACE`::

    <fm:subscribe xmlns:fm="https://feedmesh.org/ns/scribe-rss/1.0"
                  group="https://example.org/feed.xml" republication="false">
      <fm:publicKey algorithm="ed25519">BASE64 (32 bytes)</fm:publicKey>
      <!-- or: <fm:publicKey algorithm="ed25519" href="https://..." fingerprint="sha256:HEX"/> -->
      <fm:bootstrap>127.0.4.1:7000</fm:bootstrap>
      <fm:rotation>BASE64 of a rotation statement signed by the key it retires</fm:rotation>
    </fm:subscribe>

JSON Feed: the same under the feed's ``_feedmesh`` extension object::

    "_feedmesh": {"subscribe": {"group": "...", "public_key": "BASE64"
                                (or "key_url": "...", "fingerprint": "sha256:..."),
                                "bootstrap": ["127.0.4.1:7000"], "republication": false,
                                "rotations": ["BASE64", ...]}}

``rotation`` elements (in order, oldest first) carry the key's signed rotation statements
(:mod:`feedmesh.mesh.records.rotation`; they are checked there, not here): a subscriber that
bootstraps after a rotation follows the current key without the log from seq 1.

Reading is lenient about everything but the key: an element without a usable key (neither a
32-byte base64 key nor an http(s) URI with a ``sha256:`` fingerprint) is dropped with a warning on
the parsed feed; a bad bootstrap address is dropped with a warning and the rest kept. Never raises.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from feedmesh.feeds.render_base import xml_attr, xml_text
from feedmesh.model import MeshSubscribe

__all__ = ["NAMESPACE", "json_subscribe", "read_json_subscribe", "read_xml_subscribe",
           "xml_subscribe"]

NAMESPACE = "https://feedmesh.org/ns/scribe-rss/1.0"
_FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")
_HOST_PORT = re.compile(r"[A-Za-z0-9.\-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5}")
_TRUE = ("true", "1", "yes")
_MAX_BOOTSTRAP = 16
_MAX_ROTATIONS = 64
_ROTATION = re.compile(r"[A-Za-z0-9+/]{100,2000}={0,2}")


# ---- writing --------------------------------------------------------------------------------
def xml_subscribe(subscribe: MeshSubscribe | None) -> str:
    """The element for RSS 2.0 and Atom heads ("" when the feed is not multicast)."""
    if subscribe is None:
        return ""
    group = f' group="{xml_attr(subscribe.group)}"' if subscribe.group else ""
    republication = "true" if subscribe.republication else "false"
    parts = [f'<fm:subscribe xmlns:fm="{NAMESPACE}"{group} republication="{republication}">']
    if subscribe.public_key:
        parts.append(f'<fm:publicKey algorithm="ed25519">{xml_text(subscribe.public_key)}'
                     "</fm:publicKey>")
    else:
        parts.append(f'<fm:publicKey algorithm="ed25519" href="{xml_attr(subscribe.key_url)}" '
                     f'fingerprint="{xml_attr(subscribe.fingerprint)}"/>')
    for address in subscribe.bootstrap:
        parts.append(f"<fm:bootstrap>{xml_text(address)}</fm:bootstrap>")
    for statement in subscribe.rotations:
        parts.append(f"<fm:rotation>{xml_text(statement)}</fm:rotation>")
    parts.append("</fm:subscribe>\n")
    return "".join(parts)


def json_subscribe(subscribe: MeshSubscribe) -> dict[str, Any]:
    """The ``subscribe`` object of JSON Feed's ``_feedmesh`` extension."""
    out: dict[str, Any] = {}
    if subscribe.group:
        out["group"] = subscribe.group
    if subscribe.public_key:
        out["public_key"] = subscribe.public_key
    else:
        out["key_url"] = subscribe.key_url
        out["fingerprint"] = subscribe.fingerprint
    if subscribe.bootstrap:
        out["bootstrap"] = list(subscribe.bootstrap)
    out["republication"] = subscribe.republication
    if subscribe.rotations:
        out["rotations"] = list(subscribe.rotations)
    return out


# ---- reading --------------------------------------------------------------------------------
def read_xml_subscribe(element: Any, key_of, warn) -> MeshSubscribe | None:
    """``element`` is the ``fm:subscribe`` lxml element; ``warn(message)`` notes a problem."""
    key_element = None
    bootstrap: list[str] = []
    rotations: list[str] = []
    for child in element:
        key = key_of(child.tag)
        if key == "fm:publicKey" and key_element is None:
            key_element = child
        elif key == "fm:bootstrap":
            bootstrap.append((child.text or "").strip())
        elif key == "fm:rotation":
            rotations.append((child.text or "").strip())
    if key_element is None:
        warn("<subscribe> has no <publicKey>: the multicast is ignored")
        return None
    algorithm = (key_element.get("algorithm") or "ed25519").strip().lower()
    fields = {
        "group": (element.get("group") or "").strip(),
        "public_key": (key_element.text or "").strip(),
        "key_url": (key_element.get("href") or "").strip(),
        "fingerprint": (key_element.get("fingerprint") or "").strip().lower(),
        "republication": (element.get("republication") or "").strip().lower() in _TRUE,
    }
    return _validated(fields, algorithm, bootstrap, warn, rotations)


def read_json_subscribe(extension: Any, warn) -> MeshSubscribe | None:
    """``extension`` is the feed's ``_feedmesh`` object (anything: it is checked)."""
    if not isinstance(extension, dict) or "subscribe" not in extension:
        return None
    value = extension["subscribe"]
    if not isinstance(value, dict):
        warn(f"_feedmesh.subscribe is a {type(value).__name__}, not an object: ignored")
        return None

    def text(name: str) -> str:
        item = value.get(name)
        return item.strip() if isinstance(item, str) else ""

    fields = {"group": text("group"), "public_key": text("public_key"),
              "key_url": text("key_url"), "fingerprint": text("fingerprint").lower(),
              "republication": value.get("republication") is True}
    raw = value.get("bootstrap", [])
    bootstrap = [b if isinstance(b, str) else repr(b) for b in raw] if isinstance(raw, list) \
        else [repr(raw)]
    raw = value.get("rotations", [])
    rotations = [r if isinstance(r, str) else repr(r) for r in raw] if isinstance(raw, list) \
        else [repr(raw)]
    return _validated(fields, text("algorithm").lower() or "ed25519", bootstrap, warn,
                      rotations)


def _validated(fields: dict[str, Any], algorithm: str, bootstrap: list[str],
               warn, rotations: list[str] = ()) -> MeshSubscribe | None:
    if algorithm != "ed25519":
        warn(f"<subscribe> key algorithm {algorithm!r} is not ed25519: the multicast is ignored")
        return None
    if fields["public_key"]:
        problem = _key_problem(fields["public_key"])
        if problem:
            warn(f"<subscribe> <publicKey> {problem}: the multicast is ignored")
            return None
        fields["key_url"] = fields["fingerprint"] = ""
    elif fields["key_url"]:
        if not fields["key_url"].startswith(("http://", "https://")):
            warn(f"<subscribe> key URI {fields['key_url'][:80]!r} is not http(s): ignored")
            return None
        if not _FINGERPRINT.fullmatch(fields["fingerprint"]):
            warn("<subscribe> key URI without a fingerprint of the form sha256:<64 hex>: ignored")
            return None
    else:
        warn("<subscribe> <publicKey> is empty (neither inline nor a URI): ignored")
        return None
    if fields["group"] and not fields["group"].startswith(("http://", "https://")):
        warn(f"<subscribe> group {fields['group'][:80]!r} is not an http(s) URL: the feed's own "
             "URL is used")
        fields["group"] = ""
    kept = []
    for address in bootstrap:
        if _HOST_PORT.fullmatch(address) and 0 < int(address.rsplit(":", 1)[1]) < 65536:
            if len(kept) < _MAX_BOOTSTRAP and address not in kept:
                kept.append(address)
        else:
            warn(f"<subscribe> bootstrap {address[:80]!r} is not host:port: dropped")
    statements: list[str] = []
    for statement in rotations:
        if not _ROTATION.fullmatch(statement) or len(statements) >= _MAX_ROTATIONS:
            # one bad link breaks the chain: keep none (the key in <publicKey> still works)
            warn(f"<subscribe> rotation {len(statements) + 1} is not a base64 statement (or one "
                 f"too many, over {_MAX_ROTATIONS}): the rotations are ignored")
            statements = []
            break
        statements.append(statement)
    return MeshSubscribe(bootstrap=tuple(kept), rotations=tuple(statements), **fields)


def _key_problem(text: str) -> str:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return "is not base64"
    if len(raw) != 32:
        return f"is {len(raw)} bytes, an Ed25519 key is 32"
    return ""
