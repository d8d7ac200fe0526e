"""The farm's own endpoints: ``/opml`` (what to crawl) and ``/_farm/...`` (what happened).

* ``GET /opml`` - OPML 2.0 listing every feed: ``xmlUrl`` (on its own host), ``title``, ``text``,
  ``version`` (OPML's format names) and the farm's ``format`` and ``host`` attributes.
* ``GET /_farm/requests?since=N[&feed=ID][&host=IP][&limit=L]`` - the request log as JSON:
  ``{"next": N, "dropped": D, "requests": [FarmRequest, ...]}``; at most ``limit`` records
  (default 50,000): poll again with ``since=next`` for the rest.
* ``GET /_farm/truth/<id>[?since=T][&until=T]`` - the feed's posts in ``(since, until]`` (farm
  time; default: from the farm's origin to now) with their keys and guids.
* ``GET /_farm/spec/<id>`` - the feed's fixed attributes (format, validators, fault, ...).
* ``GET /_farm/stats`` - counters: requests by status, bytes, renders, cache, clock.
* ``GET /_farm/health`` - ``{"ok": true}`` once serving.

The answers are built from what they show - the model, the request log, the farm's origin and its
stats - passed in as arguments; this module does not know the server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import msgspec

from feedmesh.farm.documents import FarmModel
from feedmesh.farm.reply import Reply, text_reply
from feedmesh.farm.requestlog import RequestLog
from feedmesh.feeds.render import xml_attr

__all__ = ["control_reply", "opml_document"]

_OPML_VERSION = {"rss0.91": "RSS", "rss2.0": "RSS2", "rss1.0": "RSS1", "atom1.0": "Atom",
                 "json1.0": "JSONFeed", "json1.1": "JSONFeed"}
_json = msgspec.json.Encoder()


def opml_document(model: FarmModel) -> bytes:
    """OPML 2.0 of every feed of ``model`` (built once per farm by the caller)."""
    parts = [('<?xml version="1.0" encoding="utf-8"?>\n<opml version="2.0"><head>'
              f"<title>feedmesh farm: {model.config.feeds} feeds, seed {model.config.seed}</title>"
              "</head><body>\n")]
    for feed_id, title, fmt, host in model.catalog.listing():
        title = xml_attr(title)
        base = model.base_url(feed_id)
        parts.append(f'<outline type="rss" text="{title}" title="{title}" '
                     f'xmlUrl="{base}/feeds/{feed_id}" htmlUrl="{base}/sites/{feed_id}/" '
                     f'version="{_OPML_VERSION[fmt]}" format="{fmt}" host="{host}"/>\n')
    parts.append("</body></opml>\n")
    return "".join(parts).encode()


def _json_reply(value) -> Reply:
    body = _json.encode(value)
    return Reply(200, [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                       ("Cache-Control", "no-store")], body)


def _int(params: dict[str, str], name: str, default: int | None) -> int | None:
    value = params.get(name)
    return default if value is None else int(value)


def control_reply(path: str, params: dict[str, str], now: float, *, model: FarmModel,
                  log: RequestLog, origin: float, stats: Callable[[], dict]) -> Reply:
    """Answer a ``/_farm/...`` request (400 with the reason on bad parameters).

    ``origin`` is the farm time the farm started at (the default start of ``truth``); ``stats``
    makes the ``/_farm/stats`` counters."""
    try:
        return _control(path, params, now, model, log, origin, stats)
    except (ValueError, IndexError) as error:
        return text_reply(400 if isinstance(error, ValueError) else 404, f"{error}\n")


def _control(path: str, params: dict[str, str], now: float, model: FarmModel, log: RequestLog,
             origin: float, stats: Callable[[], dict]) -> Reply:
    name, _, rest = path[len("/_farm/"):].partition("/")
    if name == "health":
        return _json_reply({"ok": True, "feeds": model.config.feeds})
    if name == "requests":
        since = _int(params, "since", 0) or 0
        feed = _int(params, "feed", None)
        limit = _int(params, "limit", 50_000)
        records = log.since(since, feed=feed, host=params.get("host"), limit=limit)
        nxt = records[-1].seq + 1 if len(records) == limit else log.next_seq
        return _json_reply({"next": nxt, "dropped": log.dropped, "requests": records})
    if name == "truth" and rest:
        feed_id = int(rest)
        model.spec(feed_id)  # IndexError -> 404 for an unknown feed
        since = float(params.get("since", origin))
        until = float(params.get("until", now))
        posts = model.posts(feed_id, since, until)
        return _json_reply({"feed": feed_id, "since": since, "until": until, "posts": [
            {"time": p.time, "key": p.key, "guid": model.guid(feed_id, p)} for p in posts]})
    if name == "spec" and rest:
        spec = model.spec(int(rest))
        fields = dataclasses.asdict(spec)
        fields["fault"] = spec.fault.value
        fields["url"] = model.feed_url(spec.id)
        return _json_reply(fields)
    if name == "stats":
        return _json_reply(stats())
    return text_reply(404, f"no farm endpoint {path}\n")
