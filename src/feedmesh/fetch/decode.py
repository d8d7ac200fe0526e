"""Bounded content decoding: gzip, deflate and br inflated chunk by chunk under a size cap.

aiohttp's automatic decompression inflates whatever arrives; a 1 MB gzip bomb would become GBs in
memory before any check could run. We switch it off and inflate here, never producing more than the
cap allows plus one chunk.
"""

from __future__ import annotations

import zlib
from typing import Protocol

import brotli

from feedmesh.errors import FeedmeshError

__all__ = ["ContentDecoder", "DecodeError", "DecodedTooLarge", "make_decoder"]

_CHUNK_LIMIT = 256 * 1024


class DecodeError(FeedmeshError, ValueError):
    """The body is not valid for its declared Content-Encoding."""


class DecodedTooLarge(ValueError):
    """Inflating the body would exceed the decoded-size cap."""


class ContentDecoder(Protocol):
    def feed(self, chunk: bytes) -> bytes: ...
    def finish(self) -> bytes: ...


class _Identity:
    def feed(self, chunk: bytes) -> bytes:
        return chunk

    def finish(self) -> bytes:
        return b""


class _Zlib:
    def __init__(self, wbits: int, limit: int) -> None:
        self._d = zlib.decompressobj(wbits)
        self._limit = limit
        self._produced = 0
        self._raw_fallback = wbits == zlib.MAX_WBITS  # "deflate" is sometimes sent raw

    def _take(self, data: bytes) -> bytes:
        out = bytearray()
        while True:
            room = self._limit - self._produced - len(out)
            if room <= 0:
                raise DecodedTooLarge(f"decoded body exceeds {self._limit} bytes")
            piece = self._d.decompress(data, min(room + 1, _CHUNK_LIMIT))
            out += piece
            data = self._d.unconsumed_tail
            if self._produced + len(out) > self._limit:
                raise DecodedTooLarge(f"decoded body exceeds {self._limit} bytes")
            if not data:
                break
        self._produced += len(out)
        return bytes(out)

    def feed(self, chunk: bytes) -> bytes:
        try:
            return self._take(chunk)
        except zlib.error as exc:
            if self._raw_fallback and self._produced == 0:
                self._raw_fallback = False
                self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.feed(chunk)
            raise DecodeError(f"invalid compressed data: {exc}") from exc

    def finish(self) -> bytes:
        try:
            tail = self._d.flush()
        except zlib.error as exc:
            raise DecodeError(f"truncated compressed data: {exc}") from exc
        self._produced += len(tail)
        if self._produced > self._limit:
            raise DecodedTooLarge(f"decoded body exceeds {self._limit} bytes")
        return tail


class _Brotli:
    def __init__(self, limit: int) -> None:
        self._d = brotli.Decompressor()
        self._limit = limit
        self._produced = 0

    def feed(self, chunk: bytes) -> bytes:
        out = bytearray()
        try:
            piece = self._d.process(chunk, output_buffer_limit=_CHUNK_LIMIT)
            while True:
                out += piece
                if self._produced + len(out) > self._limit:
                    raise DecodedTooLarge(f"decoded body exceeds {self._limit} bytes")
                if self._d.can_accept_more_data() or self._d.is_finished():
                    break
                piece = self._d.process(b"", output_buffer_limit=_CHUNK_LIMIT)
        except brotli.error as exc:
            raise DecodeError(f"invalid brotli data: {exc}") from exc
        self._produced += len(out)
        return bytes(out)

    def finish(self) -> bytes:
        if not self._d.is_finished():
            raise DecodeError("truncated brotli data")
        return b""


def make_decoder(content_encoding: str, limit: int) -> ContentDecoder:
    """A decoder for the (last) Content-Encoding, or raise DecodeError for an unknown one."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Identity()
    if len(codings) > 1:
        raise DecodeError(f"stacked content encodings are not supported: {content_encoding!r}")
    coding = codings[0]
    if coding in ("gzip", "x-gzip"):
        return _Zlib(16 + zlib.MAX_WBITS, limit)
    if coding == "deflate":
        return _Zlib(zlib.MAX_WBITS, limit)
    if coding == "br":
        return _Brotli(limit)
    raise DecodeError(f"unsupported content encoding {coding!r}")
