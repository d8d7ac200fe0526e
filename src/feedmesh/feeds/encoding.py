"""Find how a document's bytes spell its characters, and hand lxml clean UTF-8.

Evidence, strongest first (RFC 7303 section 3 and the XML spec, appendix F):

1. a byte order mark (UTF-8, UTF-16, UTF-32): authoritative;
2. the ``charset`` of the HTTP ``Content-Type``;
3. the XML declaration's ``encoding`` (or the bare shape of UTF-16/32 without a BOM);
4. UTF-8, the XML default;
5. a guess when nothing above decodes the bytes (see :func:`_detect`).

Declarations are often wrong, so each candidate must *decode the bytes without error* to be
believed. One lie is common enough to get its own rule: a single-byte charset (ISO-8859-1,
windows-1252, ...) declared for bytes that are in fact valid, non-ASCII UTF-8; no real Latin-1
text is also valid multi-byte UTF-8, so UTF-8 wins. When a declaration proves wrong the document
is still read, and an ``encoding`` problem says which declaration lied.

The result is always UTF-8 bytes plus the name of the source encoding; the XML parser is then
told "UTF-8" whatever the declaration says, so it never has to guess again.
"""

from __future__ import annotations

import codecs
import re

import msgspec
from charset_normalizer import from_bytes

from feedmesh.model import ParseProblem

__all__ = ["Decoded", "decode_document", "http_charset"]

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# "<?" or "<" followed by a letter, in UTF-16/32 without a BOM (XML spec appendix F)
_BARE_SHAPES = (
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\x00<\x00?", "utf-16-be"),
    (b"<\x00?\x00", "utf-16-le"),
)
_XML_DECL_ENCODING = re.compile(
    rb"""^\s*<\?xml[^>]{0,200}?\bencoding\s*=\s*["']([A-Za-z0-9._:+-]{1,40})["']"""
)
_CHARSET_PARAM = re.compile(r"""charset\s*=\s*["']?([A-Za-z0-9._:+-]{1,40})""", re.IGNORECASE)
_SINGLE_BYTE_FAMILIES = ("latin", "iso8859", "cp125", "cp437", "cp850", "mac", "koi8", "cp866",
                         "ascii", "tis", "cp874")
# What an ``encoding`` field should call a Python codec (IANA names, lower case).
_IANA = {"utf_8": "utf-8", "latin_1": "iso-8859-1", "ascii": "us-ascii", "utf_16": "utf-16",
         "utf_16_le": "utf-16le", "utf_16_be": "utf-16be", "utf_32_le": "utf-32le",
         "utf_32_be": "utf-32be", "utf_32": "utf-32", "koi8_r": "koi8-r", "koi8_u": "koi8-u"}


_DEFAULT = "the XML default"
_HIGH_BYTES = bytes(range(0x80, 0x100))
_HIGH_RUN = re.compile(rb"[\x80-\xff]{2,}")


class Decoded(msgspec.Struct, frozen=True):
    """A document as UTF-8 bytes, with the encoding it arrived in."""

    utf8: bytes
    encoding: str
    """IANA-style lower-case name of the source encoding ("utf-8", "windows-1252", ...)."""
    problem: ParseProblem | None = None


def http_charset(content_type: str) -> str:
    """The ``charset`` parameter of a Content-Type header value ("" when there is none)."""
    if "charset" not in content_type.lower():
        return ""
    found = _CHARSET_PARAM.search(content_type)
    return found.group(1) if found else ""


def decode_document(data: bytes, content_type: str = "") -> Decoded:
    """Decode ``data`` using the evidence listed in the module docstring; never raises."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            text = data[len(bom):].decode(name, errors="replace")
            problem = None
            if "\ufffd" in text and "\ufffd".encode(name) not in data:
                problem = _problem(f"bytes that are not valid {name} after its byte order mark")
            return Decoded(text.encode("utf-8"), _iana(name), problem)

    head = data[:512]
    declared_http = http_charset(content_type)
    declared_xml = shape_codec = ""
    for shape, name in _BARE_SHAPES:
        if head.startswith(shape):
            declared_xml = shape_codec = name
            break
    else:
        found = _XML_DECL_ENCODING.match(head)
        if found is not None:
            declared_xml = found.group(1).decode("ascii")

    candidates: list[tuple[str, str]] = []  # (label, where it was declared)
    if declared_http:
        candidates.append((declared_http, "the HTTP Content-Type"))
    if declared_xml:
        candidates.append((declared_xml, "the XML declaration"))
    candidates.append(("utf-8", _DEFAULT))

    lies: list[str] = []
    for label, source in candidates:
        codec = _codec(label)
        if codec is None:
            lies.append(f"unknown charset {label!r} declared in {source}")
            continue
        if codec.startswith(("utf-16", "utf-32")):
            if not shape_codec.startswith(codec[:6]):
                lies.append(f"{source} declares {label!r} but the bytes are not {codec[:6]}")
                continue
            codec = shape_codec  # no BOM here: the byte order comes from the shape of "<?"
        try:
            text = data.decode(codec)
        except (UnicodeDecodeError, LookupError):
            if source == _DEFAULT:
                lies.append("the bytes are not UTF-8 either" if lies else
                            "no charset is declared and the bytes are not UTF-8 (the XML default)")
            else:
                lies.append(f"{source} declares {label!r} but the bytes are not valid {label}")
            continue
        if _is_single_byte(codec) and not data.isascii() and _valid_utf8(data):
            lies.append(f"{source} declares {label!r} but the bytes are UTF-8")
            return Decoded(data, "utf-8", _problem("; ".join(lies)))
        problem = _problem("; ".join(lies)) if lies else None
        if codec == "utf-8":
            return Decoded(data, "utf-8", problem)
        return Decoded(text.encode("utf-8"), _iana(codec), problem)

    return _detect(data, lies)


def _detect(data: bytes, lies: list[str]) -> Decoded:
    """Nothing declared decodes the bytes: guess, and say so.

    Statistical detectors are unreliable on the few non-ASCII bytes of a Latin-script feed
    (Portuguese read as Baltic windows-1257, two accented names read as Big5), and windows-1252
    is what undeclared Latin-script feeds use in practice. The shape of the bytes tells the two
    cases apart cheaply: Latin text has sparse non-ASCII bytes, mostly between ASCII letters;
    Cyrillic, Greek or CJK text has runs of them. Sparse: windows-1252 (ISO-8859-1 for the five
    bytes windows-1252 leaves undefined). Dense: charset-normalizer decides.
    """
    sample = data[: 256 * 1024]  # detection cost grows with size; a sample is as telling
    codec = "cp1252" if _sparse_high_bytes(sample) else ""
    if not codec:
        best = from_bytes(sample).best() if sample else None
        codec = best.encoding if best is not None and best.encoding else ""
    if codec:
        try:
            text = data.decode(codec)
        except (UnicodeDecodeError, LookupError):
            codec = "latin-1" if codec == "cp1252" else codec
            text = data.decode(codec, errors="replace")
        lies.append(f"read as {_iana(codec)} (detected)")
        return Decoded(text.encode("utf-8"), _iana(codec), _problem("; ".join(lies)))
    lies.append("undecodable bytes replaced by U+FFFD")
    text = data.decode("utf-8", errors="replace")
    return Decoded(text.encode("utf-8"), "utf-8", _problem("; ".join(lies)))


def _sparse_high_bytes(sample: bytes) -> bool:
    """True when most non-ASCII bytes stand alone (the shape of Latin-script single-byte text)."""
    high = len(sample) - len(sample.translate(None, _HIGH_BYTES))
    paired = sum(len(run) - 1 for run in _HIGH_RUN.findall(sample))
    return high > 0 and paired * 3 < high


def _codec(label: str) -> str | None:
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return "utf-8" if name == "utf-8-sig" else name


def _is_single_byte(codec: str) -> bool:
    plain = codec.replace("-", "").replace("_", "")
    return plain.startswith(_SINGLE_BYTE_FAMILIES) or plain in ("windows1252", "latin1")


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _iana(codec: str) -> str:
    name = codecs.lookup(codec).name
    key = name.replace("-", "_")
    if key in _IANA:
        return _IANA[key]
    if name.startswith("iso8859-"):
        return "iso-8859-" + name.split("-", 1)[1]
    if name.startswith("cp125"):
        return "windows-" + name[2:]
    return name


def _problem(message: str) -> ParseProblem:
    return ParseProblem(kind="encoding", message=message)
