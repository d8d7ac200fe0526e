"""``feedmesh parse FILE_OR_URL``: print a feed, normalized, as indented JSON.

The debugging tool for "why does this feed look wrong?": it shows exactly what the crawler would
store. Input is a file path, ``-`` for standard input, or an http(s) URL fetched with the project's
polite fetcher (:func:`feedmesh.fetch.fetch_url`, with its address guard).

Exit status:

* 0 - a feed was read; recoverable problems are in the JSON's ``error`` field;
* 1 - the input could not be obtained (missing file, fetch failure);
* 2 - the input is not a feed (the reason goes to standard error).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
from pathlib import Path

import msgspec

from feedmesh.feeds.parser import parse_feed
from feedmesh.model import FetchOutcome, ParsedFeed

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="FILE_OR_URL",
                        help="a feed file, '-' for standard input, or an http(s) URL")
    parser.add_argument("--base-url", default="",
                        help="resolve relative links against this URL (default: the fetched URL)")
    parser.add_argument("--content-type", default="",
                        help="the Content-Type to assume for a file (for its charset)")
    parser.add_argument("--allow-network", action="append", default=[], metavar="CIDR",
                        help="let the fetcher reach this private block (e.g. 127.0.0.0/8 for a "
                             "local farm); by default private addresses are refused")


def run(args: argparse.Namespace) -> int:
    source: str = args.source
    content_type: str = args.content_type
    base_url: str = args.base_url
    if source.startswith(("http://", "https://")):
        fetched = _fetch(source, tuple(args.allow_network))
        if isinstance(fetched, str):
            print(f"feedmesh parse: {fetched}", file=sys.stderr)
            return 1
        data, document_url, fetched_type = fetched
        base_url = base_url or document_url
        content_type = content_type or fetched_type
    elif source != "-" and not Path(source).exists():
        looks_like_url = "." in source.split("/", 1)[0] and not source.startswith((".", "/"))
        hint = " (a URL starts with http:// or https://)" if looks_like_url else ""
        print(f"feedmesh parse: {source!r} is neither a file nor an http(s) URL{hint}",
              file=sys.stderr)
        return 1
    else:
        try:
            data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        except OSError as exc:
            print(f"feedmesh parse: cannot read {source}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    parsed = parse_feed(data, url=base_url, content_type=content_type)
    print(render_json(parsed))
    if not parsed.is_feed or not parsed.feed.format:
        reason = parsed.error.message if parsed.error is not None else "not a feed"
        where = ""
        if parsed.error is not None and parsed.error.line is not None:
            where = f" (line {parsed.error.line}, column {parsed.error.column})"
        print(f"feedmesh parse: {source} is not a feed: {reason}{where}", file=sys.stderr)
        return 2
    return 0


def render_json(parsed: ParsedFeed) -> str:
    return msgspec.json.format(msgspec.json.encode(parsed), indent=2).decode("utf-8")


def _fetch(url: str, allow_networks: tuple[str, ...]) -> tuple[bytes, str, str] | str:
    """(body, document URL, content type), or the reason it could not be fetched."""
    try:
        from feedmesh.fetch import fetch_url
    except ImportError as exc:  # the fetch package is built separately; files work without it
        return f"fetching URLs needs feedmesh.fetch.fetch_url, which is not available ({exc})"
    if allow_networks:
        from feedmesh.fetch import FetchSettings

        try:
            settings = FetchSettings(allow_networks=allow_networks)
        except ValueError as exc:
            return str(exc)
        result = fetch_url(url, settings)
    else:
        result = fetch_url(url)
    if inspect.isawaitable(result):
        result = asyncio.run(result)
    if not result.ok:
        message = result.error.message if result.error is not None else result.outcome.value
        if result.outcome == FetchOutcome.BLOCKED:
            message += "; allow it with --allow-network CIDR (e.g. 127.0.0.0/8) if intended"
        return f"could not fetch {url}: {message}"
    return result.body, result.final_url or result.url, result.content_type
