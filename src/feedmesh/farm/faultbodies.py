"""Bodies of the abusive faults: a gzip bomb, a 100 MB feed, an endless feed, an HTML page.

All are built once per process and then only sliced, so serving them costs the farm almost
nothing but socket writes (and the writes are paced by the client's reading: flow control).

The gzip bomb is assembled, not compressed: deflating ``bomb_bytes`` of spaces would take seconds.
A 1 MiB block of spaces is deflated once with a full flush; once the deflate window holds only
spaces, every further block compresses to the same bytes, so the bomb is that piece repeated. The
gzip trailer's CRC-32 of the whole is computed with zlib's ``crc32_combine`` algorithm
(reimplemented below: Python's zlib lacks it) in O(log n) instead of reading gigabytes.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Iterator

__all__ = ["crc32_combine", "endless_chunks", "gzip_bomb", "html_page", "huge_chunks"]

_BLOCK = 1 << 20
_BOMB_PREFIX = (b'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
                b"<title>Deflated</title><description>")


def _gf2_times(a: int, b: int) -> int:
    """Multiply two polynomials modulo the CRC-32 polynomial (reflected), as zlib's multmodp."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if (a & (m - 1)) == 0:
                break
        m >>= 1
        b = (b >> 1) ^ 0xEDB88320 if b & 1 else b >> 1
    return p


@functools.cache
def _x2n_table() -> tuple[int, ...]:
    table = [1 << 30]  # x^1
    for _ in range(31):
        table.append(_gf2_times(table[-1], table[-1]))
    return tuple(table)


def _x8n(n: int) -> int:
    """x^(8n) modulo the polynomial."""
    table = _x2n_table()
    k = 3
    p = 1 << 31  # x^0
    while n:
        if n & 1:
            p = _gf2_times(table[k & 31], p)
        n >>= 1
        k += 1
    return p


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A+B from crc32(A), crc32(B) and len(B)."""
    return _gf2_times(_x8n(len2), crc1) ^ crc2


def _crc_repeat(crc: int, length: int, copies: int) -> int:
    """CRC-32 of ``copies`` back-to-back copies of a block (its CRC and length given)."""
    result: int | None = None
    power_crc, power_len = crc, length  # CRC of 2**i copies
    while copies:
        if copies & 1:
            result = power_crc if result is None else crc32_combine(result, power_crc, power_len)
        copies >>= 1
        if copies:
            power_crc = crc32_combine(power_crc, power_crc, power_len)
            power_len *= 2
    return 0 if result is None else result


@functools.lru_cache(maxsize=4)
def gzip_bomb(inflated_bytes: int) -> bytes:
    """A valid gzip stream of an RSS prefix then spaces, at least ``inflated_bytes`` long inflated.

    It inflates ~1000x (deflate's limit): 2 GiB arrive as ~2 MB. A client must stop inflating at
    its own cap; this stream is built so that it cannot tell a bomb from a feed by its first bytes.
    """
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    blocks = max(3, -(-(inflated_bytes - len(_BOMB_PREFIX)) // _BLOCK))  # at least as asked
    spaces = b" " * _BLOCK
    first = packer.compress(_BOMB_PREFIX + spaces) + packer.flush(zlib.Z_FULL_FLUSH)
    steady = packer.compress(spaces) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(spaces) + packer.flush(zlib.Z_FULL_FLUSH)
    if steady != again:  # pragma: no cover - zlib's output for a steady window is stable
        raise RuntimeError("deflate output of repeated blocks is not stable; cannot build a bomb")
    last = packer.flush(zlib.Z_FINISH)
    size = len(_BOMB_PREFIX) + blocks * _BLOCK
    tail_crc = _crc_repeat(zlib.crc32(spaces), _BLOCK, blocks - 1)
    crc = crc32_combine(zlib.crc32(_BOMB_PREFIX + spaces), tail_crc, (blocks - 1) * _BLOCK)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # gzip, deflate, no name, mtime 0
    trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
    return header + first + steady * (blocks - 1) + last + trailer


_FEED_HEAD = (b'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
              b"<title>%s</title><link>%s</link><description>A very long feed</description>\n")
_FEED_TAIL = b"</channel></rss>\n"


def _item_block(link: bytes, size: int) -> bytes:
    item = (b"<item><title>Item of a very long feed</title><link>%s</link><description>"
            b"&lt;p&gt;%s&lt;/p&gt;</description></item>\n" % (link, b"filler text " * 60))
    return (item * (size // len(item) + 1))[:size]


def huge_chunks(title: str, link: str, total: int) -> Iterator[bytes]:
    """Exactly ``total`` bytes of an RSS document, in 1 MiB pieces (items repeated)."""
    head = _FEED_HEAD % (title.encode(), link.encode())
    block = _item_block(link.encode(), _BLOCK)
    body_len = max(0, total - len(head) - len(_FEED_TAIL))
    yield head
    while body_len > 0:
        piece = block if body_len >= len(block) else block[:body_len]
        yield piece
        body_len -= len(piece)
    yield _FEED_TAIL


def endless_chunks(title: str, link: str) -> Iterator[bytes]:
    """An RSS document that never ends (64 KiB pieces of items, forever)."""
    yield _FEED_HEAD % (title.encode(), link.encode())
    block = _item_block(link.encode(), 64 * 1024)
    while True:
        yield block


def html_page(title: str, link: str) -> bytes:
    """The web page a feed URL sometimes returns instead of the feed."""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title></head><body><h1>{title}</h1>"
            f"<p>Welcome to our new website! Our articles now live at <a href=\"{link}\">{link}"
            f"</a>.</p><ul>" + "".join(f"<li><a href=\"{link}#{i}\">Story {i}</a></li>"
                                       for i in range(20)) + "</ul></body></html>\n").encode()
