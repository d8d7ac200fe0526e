"""The JSON API: accounts, subscriptions, source feeds, OPML, query preview and stats.

Every request except sign-up, stats and the OpenAPI description carries ``Authorization: Bearer
<token>``; an account sees and changes only its own subscriptions and sources (another account's
ids answer 404, exactly like ids that do not exist). Requests are rate-limited per token (per
client address for sign-up). Errors have one shape (:mod:`.errors`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import regex
from aiohttp import web

from feedmesh.feeds.opml import OpmlError, OpmlOutline, parse_opml, render_opml
from feedmesh.fetch.redact import redact_credentials
from feedmesh.hub.front.archive import feed_ttl_minutes
from feedmesh.hub.front.facade import (
    FeedUnavailable,
    FollowLimitError,
    HubFacade,
    PushRefusedError,
    SourceView,
)
from feedmesh.hub.web.errors import ApiError
from feedmesh.hub.web.feeds import FeedServer
from feedmesh.hub.web.limits import RateLimiter, WebLimits
from feedmesh.hub.web.operator import is_operator, shown_stats
from feedmesh.hub.web.websub import attempt_json, push_error, websub_subscriber_json
from feedmesh.match import QueryError, html_to_text, parse_query
from feedmesh.memory import release_memory
from feedmesh.store import Account, PushAttempt, PushTarget, Subscription

__all__ = ["Api"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_TOKEN_SYNTAX = re.compile(r"fm_[0-9]{1,18}_[A-Za-z0-9_-]{1,100}")
"""What :meth:`feedmesh.store.HubState.create_account` hands out:
``fm_<account id>_<token_urlsafe secret>``."""


def _path_id(raw: str) -> int | None:
    """The id in a path, or None when it cannot name a row: only ASCII digits (``str.isdigit``
    also takes '²' and Arabic-Indic digits) and small enough for SQLite's 64-bit integers."""
    if raw.isascii() and raw.isdigit() and len(raw) <= 18:
        return int(raw)
    return None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number (RFC 8259 has no NaN or Infinity)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key!r} appears twice in one object")
        found[key] = value
    return found


def decode_json_body(raw: bytes) -> Any:
    """A request body as JSON, strictly: no NaN or Infinity, no key twice in an object (which
    one would win differs between parsers), nesting only as deep as the parser's stack allows;
    anything else is a 400 ``malformed_json`` saying why."""
    try:
        return json.loads(raw, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except RecursionError as exc:
        raise ApiError(400, "malformed_json", "request body is not valid JSON: it is nested "
                       "too deeply") from exc
    except json.JSONDecodeError as exc:
        raise ApiError(400, "malformed_json", f"request body is not valid JSON: {exc}",
                       position=exc.pos) from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "malformed_json", f"request body is not valid JSON: {exc}") from exc


_WORD = r"[\p{L}\p{M}\p{N}]"
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}"
                          r"\p{Myanmar}]")


def term_pattern(terms: list[str]) -> regex.Pattern[str] | None:
    """Where ``terms`` (``word``, ``prefix*``, ``"a phrase"``) are in a text, by word as the
    matcher has them: ``law`` is not in "Flawed", ``music*`` is the whole of "musical", a
    phrase's words have anything but letters and digits between them; in scripts written
    without spaces, anywhere. The page's ``highlighted()`` (static/app.js) marks the same."""
    parts = []
    for term in terms:
        prefix = term.endswith("*")
        words = [regex.escape(w) for w in term.strip('"').rstrip("*").split()]
        if not words or (len(words) == 1 and len(words[0]) < 2):
            continue
        body = f"(?:(?!{_WORD}).)+".join(words)
        if _UNSPACED.search(term):
            parts.append(body)
        else:
            parts.append(f"(?<!{_WORD}){body}" + (f"{_WORD}*" if prefix else f"(?!{_WORD})"))
    return regex.compile("|".join(parts), regex.IGNORECASE) if parts else None


def _snippet(entry_summary: str, entry_content: str, terms: list[str],
             limit: int = 300) -> str:
    """About ``limit`` characters of an entry as plain text, around the first of the matched
    ``terms`` it shows (the summary first, then the content), so that the page can highlight
    why the entry matched; the summary's beginning when no term is in either."""
    texts = [" ".join(html_to_text(f).split()) for f in (entry_summary, entry_content) if f]
    pattern = term_pattern(terms)
    for text in texts:
        found = pattern.search(text) if pattern is not None else None
        if found:
            start = max(0, found.start() - limit // 3)
            if start:
                start = text.find(" ", start) + 1 or start
            piece = text[start:start + limit]
            return ("…" if start else "") + piece + ("…" if start + limit < len(text) else "")
    text = texts[0] if texts else ""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + "…"


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(data), content_type="application/json")


class Api:
    def __init__(self, hub: HubFacade, feeds: FeedServer, limits: WebLimits, *,
                 operator_token: bytes | None = None) -> None:
        self.hub = hub
        self.operator_token = operator_token
        self.feeds = feeds
        self.limits = limits
        self.api_limiter = RateLimiter(hub.clock, limits.api_rate_per_s, limits.api_burst)
        self.signup_limiter = RateLimiter(hub.clock, limits.signup_rate_per_s,
                                          limits.signup_burst)

    def routes(self) -> list[web.RouteDef]:
        a = self.authenticated
        return [
            web.post("/api/accounts", self.create_account),
            web.get("/api/accounts/me", a(self.me)),
            web.post("/api/accounts/me/token", a(self.rotate_token)),
            web.get("/api/subscriptions", a(self.list_subscriptions)),
            web.post("/api/subscriptions", a(self.create_subscription)),
            web.get("/api/subscriptions.opml", a(self.subscriptions_opml)),
            web.get("/api/subscriptions/{id}", a(self.get_subscription)),
            web.patch("/api/subscriptions/{id}", a(self.change_subscription)),
            web.delete("/api/subscriptions/{id}", a(self.delete_subscription)),
            web.get("/api/subscriptions/{id}/entries", a(self.subscription_entries)),
            web.get("/api/subscriptions/{id}/websub", a(self.list_websub)),
            web.patch("/api/subscriptions/{id}/websub/{target}", a(self.change_websub)),
            web.get("/api/subscriptions/{id}/websub/{target}/deliveries",
                    a(self.websub_deliveries)),
            web.get("/api/subscriptions/{id}/webhooks", a(self.list_webhooks)),
            web.post("/api/subscriptions/{id}/webhooks", a(self.add_webhook)),
            web.delete("/api/subscriptions/{id}/webhooks/{hook}", a(self.remove_webhook)),
            web.get("/api/subscriptions/{id}/webhooks/{hook}/deliveries",
                    a(self.webhook_deliveries)),
            web.post("/api/subscriptions/{id}/webhooks/{hook}/test", a(self.test_webhook)),
            web.get("/api/sources", a(self.list_sources)),
            web.post("/api/sources", a(self.add_source)),
            web.delete("/api/sources/{id}", a(self.remove_source)),
            web.get("/api/opml", a(self.export_opml)),
            web.post("/api/opml", a(self.import_opml)),
            web.post("/api/preview", a(self.preview)),
            web.get("/api/stats", self.stats),
        ]

    # -- plumbing ---------------------------------------------------------------------------

    def authenticated(self, handler: Callable[[web.Request, Account], Awaitable[web.Response]]
                      ) -> Handler:
        async def wrapper(request: web.Request) -> web.Response:
            header = request.headers.get("Authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ApiError(401, "unauthorized", "this request needs an 'Authorization: "
                               "Bearer <token>' header with the token given at sign-up")
            token = token.strip()
            if not _TOKEN_SYNTAX.fullmatch(token):
                # Checked here, before storage sees it: every malformed token gets the same
                # answer without a lookup ('²' and 10**23 are digits to str.isdigit).
                raise ApiError(401, "unauthorized", "malformed token: API tokens look like "
                               "fm_<account>_<secret>, as given at sign-up")
            account = await self.hub.authenticate(token)
            if account is None:
                raise ApiError(401, "unauthorized", "unknown or revoked token")
            wait = self.api_limiter.allow(f"account:{account.id}")
            if wait:
                error = ApiError(429, "rate_limited", f"too many requests; retry in {wait:.1f} s",
                                 retry_after_s=round(wait, 1))
                error.headers["Retry-After"] = self.api_limiter.retry_after(wait)
                raise error
            return await handler(request, account)

        return wrapper

    async def _body(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        if not raw:  # no body, whatever the type says (aiohttp reports none as octet-stream)
            return {}
        if request.content_type != "application/json":
            raise ApiError(415, "unsupported_media_type",
                           "send JSON (Content-Type: application/json), "
                           f"not {request.content_type}")
        if len(raw) > self.limits.max_body_bytes:
            raise ApiError(413, "body_too_large", f"request body is {len(raw)} bytes, over the "
                           f"{self.limits.max_body_bytes}-byte limit",
                           limit=self.limits.max_body_bytes)
        data = decode_json_body(raw)
        if not isinstance(data, dict):
            raise ApiError(400, "malformed_json", "request body must be a JSON object, not "
                           f"{type(data).__name__}")
        return data

    async def _owned(self, request: web.Request, account: Account) -> Subscription:
        raw = request.match_info["id"]
        sub_id = _path_id(raw)
        sub = await self.hub.subscription(sub_id) if sub_id is not None else None
        if sub is None or sub.account_id != account.id:
            raise ApiError(404, "not_found", f"you have no subscription {raw}")
        return sub

    def _subscription_json(self, sub: Subscription) -> dict[str, Any]:
        return {"id": sub.id, "name": sub.name, "query": sub.query,
                "normalized": parse_query(sub.query).normalized, "keep": sub.keep,
                "created_at": sub.created_at, "changed_at": sub.changed_at,
                "feed_urls": self.feeds.urls(self.hub.feed_token(sub))}

    async def _subscriptions_json(self, subs: list[Subscription]) -> list[dict[str, Any]]:
        """Each subscription with what its feed holds now (``feed``): how many of the ``keep``
        newest matches, the ``ttl_minutes`` it advertises, and how far back its archive
        reaches (``archive_since``: when the oldest entry stored was first seen; None when
        nothing is stored). ``holds`` is None while its reflector cannot be reached."""
        since = await self.hub.archive_reach()

        async def one(sub: Subscription) -> dict[str, Any]:
            shown = self._subscription_json(sub)
            try:
                items = await self.hub.feed_items(sub.id)
            except FeedUnavailable:
                shown["feed"] = {"holds": None, "ttl_minutes": None, "archive_since": since}
                return shown
            shown["feed"] = {"holds": len(items), "archive_since": since,
                             "ttl_minutes": feed_ttl_minutes([i.first_seen_at for i in items],
                                                             sub.keep)}
            return shown

        return list(await asyncio.gather(*(one(sub) for sub in subs)))

    async def _one_json(self, sub: Subscription) -> dict[str, Any]:
        return (await self._subscriptions_json([sub]))[0]

    # -- accounts ---------------------------------------------------------------------------

    async def create_account(self, request: web.Request) -> web.Response:
        wait = self.signup_limiter.allow(f"ip:{request.remote}")
        if wait:
            error = ApiError(429, "rate_limited", f"too many sign-ups from this address; retry "
                             f"in {wait:.0f} s", retry_after_s=round(wait, 1))
            error.headers["Retry-After"] = self.signup_limiter.retry_after(wait)
            raise error
        body = await self._body(request)
        name = body.get("name", "")
        if not isinstance(name, str) or len(name) > 100:
            raise ApiError(400, "invalid_name", "name must be text of at most 100 characters")
        account, token = await self.hub.create_account(name.strip())
        return _json({"account": {"id": account.id, "name": account.name,
                                  "created_at": account.created_at}, "token": token}, 201)

    async def me(self, request: web.Request, account: Account) -> web.Response:
        return _json({"account": {"id": account.id, "name": account.name,
                                  "created_at": account.created_at},
                      "subscriptions": await self.hub.count_subscriptions(account.id),
                      "sources": len(await self.hub.sources(account.id))})

    async def rotate_token(self, request: web.Request, account: Account) -> web.Response:
        return _json({"token": await self.hub.rotate_token(account.id)})

    # -- subscriptions ----------------------------------------------------------------------

    def _query_fields(self, body: dict[str, Any], *, required: bool) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if "query" in body or required:
            query = body.get("query")
            if not isinstance(query, str) or not query.strip():
                raise ApiError(400, "invalid_query", "query is required: the words to watch "
                               "for, e.g. (law AND internet) OR privacy")
            try:
                parse_query(query)
            except QueryError as exc:
                raise ApiError(400, "invalid_query", str(exc), position=exc.position,
                               hint=exc.hint) from exc
            fields["query"] = query
        if "name" in body:
            name = body["name"]
            if not isinstance(name, str) or len(name) > 200:
                raise ApiError(400, "invalid_name", "name must be text of at most 200 characters")
            fields["name"] = name.strip()
        if "keep" in body:
            keep = body["keep"]
            if not isinstance(keep, int) or isinstance(keep, bool) or not \
                    1 <= keep <= self.limits.max_keep:
                raise ApiError(400, "invalid_keep", f"keep must be a whole number from 1 to "
                               f"{self.limits.max_keep} (entries kept in the feed)")
            fields["keep"] = keep
        return fields

    async def list_subscriptions(self, request: web.Request, account: Account) -> web.Response:
        return _json({"subscriptions": await self._subscriptions_json(
            await self.hub.subscriptions(account.id))})

    async def create_subscription(self, request: web.Request, account: Account) -> web.Response:
        fields = self._query_fields(await self._body(request), required=True)
        if await self.hub.count_subscriptions(account.id) >= \
                self.limits.max_subscriptions_per_account:
            raise ApiError(403, "limit_reached", f"an account may hold at most "
                           f"{self.limits.max_subscriptions_per_account} subscriptions")
        sub = await self.hub.add_subscription(account.id, name=fields.get("name", ""),
                                              query=fields["query"], keep=fields.get("keep", 10))
        return _json({"subscription": await self._one_json(sub)}, 201)

    async def subscriptions_opml(self, request: web.Request, account: Account) -> web.Response:
        """Every private feed of the account in one OPML file, for a reader to import at once:
        an outline per subscription, titled by it, in the format asked for (RSS unless told)."""
        kind = request.query.get("format", "rss")
        if kind not in ("rss", "atom", "json"):
            raise ApiError(400, "invalid_format", f"format must be rss, atom or json, not "
                           f"{kind[:20]!r}")
        outlines = [OpmlOutline(url=self.feeds.urls(self.hub.feed_token(sub))[kind],
                                title=f"feedmesh: {sub.name or sub.query}",
                                html_url=self.feeds.base_url + "/")
                    for sub in await self.hub.subscriptions(account.id)]
        who = account.name or f"account {account.id}"
        body = render_opml(f"feedmesh subscriptions of {who}", outlines)
        return web.Response(body=body, content_type="text/x-opml", charset="utf-8", headers={
            "Content-Disposition": f'attachment; filename="feedmesh-subscriptions-{kind}.opml"'})

    async def get_subscription(self, request: web.Request, account: Account) -> web.Response:
        return _json({"subscription": await self._one_json(await self._owned(request, account))})

    async def change_subscription(self, request: web.Request, account: Account) -> web.Response:
        sub = await self._owned(request, account)
        body = await self._body(request)
        fields = self._query_fields(body, required=False)
        new_url = body.get("new_url", False)
        if not isinstance(new_url, bool):
            raise ApiError(400, "invalid_new_url", "new_url must be true or false")
        changed = await self.hub.change_subscription(sub, name=fields.get("name"),
                                                     query=fields.get("query"),
                                                     keep=fields.get("keep"), new_url=new_url)
        return _json({"subscription": await self._one_json(changed)})

    async def delete_subscription(self, request: web.Request, account: Account) -> web.Response:
        await self.hub.remove_subscription(await self._owned(request, account))
        return web.Response(status=204)

    async def subscription_entries(self, request: web.Request, account: Account) -> web.Response:
        sub = await self._owned(request, account)
        items = await self.hub.feed_items(sub.id)
        return _json({"entries": [{"id": i.entry_id, "title": i.entry.title,
                                   "link": i.entry.link, "feed_title": i.feed_title,
                                   "first_seen_at": i.first_seen_at} for i in items]})

    # -- push: WebSub subscribers and webhooks --------------------------------------------

    async def list_websub(self, request: web.Request, account: Account) -> web.Response:
        """Who subscribed to this private feed over WebSub (its owner may want to know), each
        with its last deliveries."""
        sub = await self._owned(request, account)
        return _json({"subscribers": [
            websub_subscriber_json(t, (await self.hub.push_attempts(t.id))[:5])
            for t in self.hub.push_targets(sub.id) if t.kind == "websub"]})

    async def change_websub(self, request: web.Request, account: Account) -> web.Response:
        """Choose how a WebSub subscriber of this feed's deliveries are signed:
        ``{"signature": "sha1"}`` for an older PubSubHubbub 0.4 subscriber that checks nothing
        else (docs/websub-hub.md)."""
        found = await self._target(request, account, "websub", "target", "WebSub subscriber")
        body = await self._body(request)
        try:
            changed = await self.hub.set_push_signature(found, body.get("signature"))
        except PushRefusedError as exc:
            raise push_error(exc) from exc
        return _json({"subscriber": websub_subscriber_json(
            changed, (await self.hub.push_attempts(changed.id))[:5])})

    async def websub_deliveries(self, request: web.Request, account: Account) -> web.Response:
        found = await self._target(request, account, "websub", "target", "WebSub subscriber")
        return _json({"deliveries": [attempt_json(a)
                                     for a in await self.hub.push_attempts(found.id)]})

    def _webhook_json(self, target: PushTarget, attempts: list[PushAttempt] | None = None,
                      secret: bool = False) -> dict[str, Any]:
        found: dict[str, Any] = {"id": target.id, "url": target.url,
                                 "created_at": target.created_at}
        if secret:
            found["secret"] = target.secret
        if attempts is not None:
            found["deliveries"] = [attempt_json(a) for a in attempts]
        return found

    async def _webhook(self, request: web.Request, account: Account) -> PushTarget:
        return await self._target(request, account, "webhook", "hook", "webhook")

    async def _target(self, request: web.Request, account: Account, kind: str, param: str,
                      what: str) -> PushTarget:
        """The push target of ``kind`` the path names (``param``) in a subscription of
        ``account``'s, else 404."""
        sub = await self._owned(request, account)
        raw = request.match_info[param]
        target_id = _path_id(raw)
        found = next((t for t in self.hub.push_targets(sub.id)
                      if t.kind == kind and t.id == target_id), None)
        if found is None:
            raise ApiError(404, "not_found", f"subscription {sub.id} has no {what} {raw}")
        return found

    async def list_webhooks(self, request: web.Request, account: Account) -> web.Response:
        sub = await self._owned(request, account)
        hooks = [t for t in self.hub.push_targets(sub.id) if t.kind == "webhook"]
        return _json({"webhooks": [self._webhook_json(t, (await self.hub.push_attempts(t.id))[:5])
                                   for t in hooks]})

    async def add_webhook(self, request: web.Request, account: Account) -> web.Response:
        sub = await self._owned(request, account)
        url = (await self._body(request)).get("url")
        if not isinstance(url, str) or not url.strip():
            raise ApiError(400, "invalid_url", "url is required: the http:// or https:// "
                           "address to POST new entries to")
        try:
            hook = await self.hub.add_webhook(sub.id, url.strip())
        except PushRefusedError as exc:
            raise push_error(exc) from exc
        # The secret is shown here only: it signs every delivery (X-Feedmesh-Signature).
        return _json({"webhook": self._webhook_json(hook, secret=True)}, 201)

    async def remove_webhook(self, request: web.Request, account: Account) -> web.Response:
        await self.hub.remove_push_target(await self._webhook(request, account))
        return web.Response(status=204)

    async def webhook_deliveries(self, request: web.Request, account: Account) -> web.Response:
        hook = await self._webhook(request, account)
        return _json({"deliveries": [attempt_json(a)
                                     for a in await self.hub.push_attempts(hook.id)]})

    async def test_webhook(self, request: web.Request, account: Account) -> web.Response:
        hook = await self._webhook(request, account)
        self.hub.test_webhook(hook)
        return _json({"queued": True, "webhook": self._webhook_json(hook)}, 202)

    # -- sources ----------------------------------------------------------------------------

    async def _add_sources(self, account: Account,
                           outlines: list[OpmlOutline]) -> list[dict[str, Any]]:
        try:
            followed = await self.hub.follow_sources(
                account.id, outlines, limit=self.limits.max_sources_per_account)
        except FollowLimitError as exc:
            raise ApiError(403, "limit_reached", str(exc), limit=exc.limit) from exc
        return [{"id": fid, "url": redact_credentials(o.url), "title": o.title, "new": new}
                for (fid, new), o in zip(followed, outlines, strict=True)]

    def _source_json(self, source: SourceView) -> dict[str, Any]:
        return {"id": source.id, "url": source.url, "title": source.title,
                "added_at": source.added_at, "active": source.active,
                "last_outcome": source.last_outcome, "last_error": source.last_error,
                "category": source.category, "html_url": source.html_url,
                "next_fetch_at": source.next_fetch_at,
                "last_fetched_at": source.last_fetched_at or None, "errors": source.errors}

    async def list_sources(self, request: web.Request, account: Account) -> web.Response:
        return _json({"sources": [self._source_json(s)
                                  for s in await self.hub.sources(account.id)]})

    async def add_source(self, request: web.Request, account: Account) -> web.Response:
        body = await self._body(request)
        url = body.get("url")
        if not isinstance(url, str) or not url.strip().lower().startswith(("http://",
                                                                          "https://")):
            raise ApiError(400, "invalid_url", "url must be an http:// or https:// feed address")
        if len(url) > 2000:
            raise ApiError(400, "invalid_url", "url is longer than 2000 characters")
        title = body.get("title", "")
        if not isinstance(title, str) or len(title) > 200:
            raise ApiError(400, "invalid_title", "title must be text of at most 200 characters")
        (added,) = await self._add_sources(account, [OpmlOutline(url=url.strip(),
                                                                 title=title)])
        # 201: followed now; 200: it already was, and nothing changed.
        return _json({"source": added}, 201 if added["new"] else 200)

    async def remove_source(self, request: web.Request, account: Account) -> web.Response:
        raw = request.match_info["id"]
        feed_id = _path_id(raw)
        if feed_id is None or not await self.hub.unfollow_source(account.id, feed_id):
            raise ApiError(404, "not_found", f"you follow no source {raw}")
        return web.Response(status=204)

    async def export_opml(self, request: web.Request, account: Account) -> web.Response:
        outlines = [OpmlOutline(url=s.url, title=s.title, html_url=s.html_url,
                                category=s.category)
                    for s in await self.hub.sources(account.id) if s.url]
        body = render_opml(f"feedmesh sources of {account.name or f'account {account.id}'}",
                           outlines)
        return web.Response(body=body, content_type="text/x-opml", charset="utf-8")

    async def import_opml(self, request: web.Request, account: Account) -> web.Response:
        if request.content_length and request.content_length > self.limits.max_opml_bytes:
            raise ApiError(413, "body_too_large", f"OPML is limited to "
                           f"{self.limits.max_opml_bytes} bytes")
        data = await request.read()
        try:
            result = parse_opml(data, max_bytes=self.limits.max_opml_bytes,
                                max_outlines=self.limits.max_opml_outlines)
        except OpmlError as exc:
            raise ApiError(400, "invalid_opml", str(exc)) from exc
        listed = await self._add_sources(account, list(result.outlines))
        if len(result.outlines) > 1000:
            release_memory()  # a big list's parse tree and records are garbage now
        added = sum(1 for source in listed if source["new"])
        return _json({"added": added, "already_followed": len(listed) - added,
                      "sources": listed, "skipped": list(result.skipped)})

    # -- preview and stats ------------------------------------------------------------------

    async def preview(self, request: web.Request, account: Account) -> web.Response:
        fields = self._query_fields(await self._body(request), required=True)
        query = parse_query(fields["query"])
        searched, found = await self.hub.recent_matches(query, self.limits.preview_entries)
        matches = [{"title": m.item.entry.title, "link": m.item.entry.link,
                    "feed_title": m.feed_title, "first_seen_at": m.item.first_seen_at,
                    "summary": _snippet(m.item.entry.summary, m.item.entry.content,
                                        list(m.terms)),
                    "terms": list(m.terms)} for m in found[:50]]
        return _json({"normalized": query.normalized, "searched": searched,
                      "matched": len(found), "matches": matches})

    async def stats(self, request: web.Request) -> web.Response:
        return _json(shown_stats(await self.hub.stats(),
                                 operator=is_operator(request, self.operator_token)))
