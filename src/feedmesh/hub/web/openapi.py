"""The OpenAPI 3.1 description of the JSON API, served at ``/api/openapi.json``."""

from __future__ import annotations

from typing import Any

from feedmesh import __version__
from feedmesh.websub.signature import METHODS as SIGNATURE_METHODS

__all__ = ["openapi"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _answer(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description}
    if schema is not None:
        answer["content"] = {"application/json": {"schema": schema}}
    return answer


_ERRORS = {str(code): _answer(text, _ref("Error")) for code, text in (
    (400, "Bad request (malformed JSON, invalid field)"),
    (401, "Missing, unknown or revoked token"),
    (404, "No such resource (or not yours)"),
    (413, "Body too large"),
    (415, "Body is not JSON"),
    (429, "Rate limited; see Retry-After"),
    (503, ("Storage full or unavailable (storage_full, storage_unavailable), or push not "
           "served by this process (push_unavailable); see Retry-After")),
)}
_LIMIT = {"403": _answer("A per-account limit is reached", _ref("Error"))}

# What the server refuses, as far as a schema can say it: blank text, and the control characters
# and lone surrogates the query lexer refuses (tab, newline and the like are spaces to it).
_QUERY = {"type": "string", "minLength": 1, "maxLength": 1000,
          "allOf": [{"pattern": "\\S"},
                    {"pattern": "^[^\\u0000-\\u0008\\u000e-\\u001b\\u007f-\\u0084"
                                "\\u0086-\\u009f\\ud800-\\udfff]*$"}],
          "description": "e.g. (law AND internet) OR privacy; see docs/web.md"}
_SUB_FIELDS = {
    "query": _QUERY,
    "name": {"type": "string", "maxLength": 200},
    "keep": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
             "description": "entries kept in the feed"},
}
_ID = {"type": "integer", "minimum": 1}
_PUSH_URL = {"type": "string", "maxLength": 2000,
             "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[a-z0-9]+(\\.[a-z0-9]+)*(:[1-9][0-9]{0,3})?"
                        "(/[!$&-.0-9;=?A-Z_a-z~/]*)?$",
             "description": "an http(s) URL without credentials or fragment; its address must "
                            "pass the hub's address guard (no private, loopback or metadata "
                            "address unless allowed)"}
_STR = {"type": "string"}


def _object(required: tuple[str, ...] = (), **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


_SCHEMAS: dict[str, Any] = {
    "Error": _object(("error",), error=_object(
        ("status", "code", "message"), status={"type": "integer"}, code=_STR, message=_STR,
        position={"type": ["integer", "null"]}, hint=_STR, limit={"type": ["integer", "null"]},
        retry_after_s={"type": "number"})),
    "Account": _object(("id", "name", "created_at"), id=_ID, name=_STR,
                       created_at={"type": "number"}),
    "Subscription": _object(
        ("id", "name", "query", "normalized", "keep", "created_at", "changed_at", "feed_urls"),
        id=_ID, query=_STR, name=_STR, keep={"type": "integer"}, normalized=_STR,
        created_at={"type": "number"}, changed_at={"type": "number"},
        feed_urls=_object(("rss", "atom", "json"), rss=_STR, atom=_STR, json=_STR),
        feed=_object(("holds", "ttl_minutes", "archive_since"),
                     holds={"type": ["integer", "null"], "description": (
                         "Matches the feed holds now (at most keep; null: its reflector "
                         "cannot be reached)")},
                     ttl_minutes={"type": ["integer", "null"], "description": (
                         "The poll interval the feed advertises: half the time in which keep "
                         "matches arrive at its own rate")},
                     archive_since={"type": ["number", "null"], "description": (
                         "How far back its archive (prev-archive) reaches: when the oldest "
                         "entry stored was first seen")})),
    "Source": _object(("id", "url", "title"), id=_ID, url=_STR, title=_STR,
                      added_at={"type": "number"}, active={"type": "boolean"},
                      last_outcome=_STR, last_error=_STR, category=_STR, html_url=_STR,
                      next_fetch_at={"type": ["number", "null"],
                                     "description": "when it will be fetched next (Unix "
                                                    "seconds); null: not scheduled"},
                      last_fetched_at={"type": ["number", "null"],
                                       "description": "when it was last fetched (Unix "
                                                      "seconds); null: not yet"},
                      errors={"type": "integer", "minimum": 0,
                              "description": "failed fetches in a row (0: the last went well)"},
                      new={"type": "boolean",
                           "description": "in answers to adding: followed now (false: it "
                                          "already was, and nothing changed)"}),
    "Entry": _object(("id", "title", "link", "feed_title", "first_seen_at"), id=_ID, title=_STR,
                     link=_STR, feed_title=_STR, first_seen_at={"type": "number"}),
    "Match": _object(("title", "link", "feed_title", "first_seen_at", "summary", "terms"),
                     title=_STR, link=_STR, feed_title=_STR, first_seen_at={"type": "number"},
                     summary={"type": "string", "description": "plain text, about 300 "
                                                               "characters"},
                     terms={"type": "array", "items": _STR,
                            "description": "the query's terms the entry holds: why it "
                                           "matched (word, prefix*, \"a phrase\")"}),
    "Delivery": _object(("at", "attempt", "status", "ok", "error", "entries", "elapsed_ms"),
                        at={"type": "number"}, attempt={"type": "integer"},
                        status={"type": "integer", "description": "HTTP status answered; 0: "
                                                                  "none (refused, unreachable, "
                                                                  "timed out)"},
                        ok={"type": "boolean"}, error=_STR, entries={"type": "integer"},
                        elapsed_ms={"type": "number"}),
    "Webhook": _object(("id", "url", "created_at"), id=_ID, url=_STR,
                       created_at={"type": "number"},
                       secret={"type": "string", "description": "signs each delivery "
                               "(X-Feedmesh-Signature: sha256=HMAC of the body); shown only "
                               "when the webhook is created"},
                       deliveries={"type": "array", "items": {"$ref":
                                                              "#/components/schemas/Delivery"},
                                   "description": "the last attempts, newest first"}),
    "WebSubSubscriber": _object(
        ("id", "callback", "format", "signed", "signature", "lease_seconds", "expires_at",
         "created_at"),
        id=_ID, callback=_STR, format=_STR, signed={"type": "boolean"},
        signature={"type": "string", "enum": list(SIGNATURE_METHODS),
                   "description": "the X-Hub-Signature method of its deliveries when signed"},
        lease_seconds={"type": "integer"}, expires_at={"type": ["number", "null"]},
        created_at={"type": "number"},
        deliveries={"type": "array", "items": {"$ref": "#/components/schemas/Delivery"},
                    "description": "the last attempts, newest first"}),
}
_OPML_EXAMPLE = ('<?xml version="1.0"?><opml version="2.0"><head><title>mine</title></head><body>'
                 '<outline text="A feed" xmlUrl="https://example.org/feed.xml"/></body></opml>')


def openapi(base_url: str) -> dict[str, Any]:
    auth = [{"bearer": []}]
    sub_path = {"parameters": [{"name": "id", "in": "path", "required": True, "schema": _ID}]}
    hook_path = {"parameters": [*sub_path["parameters"],
                                {"name": "hook", "in": "path", "required": True,
                                 "schema": _ID}]}
    target_path = {"parameters": [*sub_path["parameters"],
                                  {"name": "target", "in": "path", "required": True,
                                   "schema": _ID}]}
    webhook = _object(("webhook",), webhook=_ref("Webhook"))
    subscription = _object(("subscription",), subscription=_ref("Subscription"))

    def op(summary: str, responses: dict[str, Any], body: dict[str, Any] | None = None,
           secured: bool = True) -> dict[str, Any]:
        operation: dict[str, Any] = {"summary": summary, "responses": {**responses, **_ERRORS}}
        if body is not None:
            operation["requestBody"] = body
        if secured:
            operation["security"] = auth
        return operation

    return {
        "openapi": "3.1.0",
        "info": {"title": "feedmesh hub API", "version": __version__,
                 "description": "Keyword subscriptions over many feeds, each served back as a "
                                "private feed. Every error has the Error shape."},
        "servers": [{"url": base_url}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": _SCHEMAS,
        },
        "paths": {
            "/api/accounts": {"post": op(
                "Create an account; the answer holds its API token (shown once)",
                {"201": _answer("Created", _object(("account", "token"),
                                                   account=_ref("Account"), token=_STR))},
                _json_body(_object(name={"type": "string", "maxLength": 100}), required=False),
                secured=False)},
            "/api/accounts/me": {"get": op("Your account", {"200": _answer("OK", _object(
                ("account", "subscriptions", "sources"), account=_ref("Account"),
                subscriptions={"type": "integer"}, sources={"type": "integer"}))})},
            "/api/accounts/me/token": {"post": op(
                "Replace your API token (the old one stops working)",
                {"200": _answer("OK", _object(("token",), token=_STR))})},
            "/api/subscriptions": {
                "get": op("Your subscriptions", {"200": _answer("OK", _object(
                    ("subscriptions",), subscriptions={"type": "array",
                                                       "items": _ref("Subscription")}))}),
                "post": op("Create a subscription; the answer carries its private feed URLs",
                           {"201": _answer("Created", subscription), **_LIMIT},
                           _json_body({"type": "object", "required": ["query"],
                                       "properties": _SUB_FIELDS}))},
            "/api/subscriptions/{id}": {
                **sub_path,
                "get": op("One subscription", {"200": _answer("OK", subscription)}),
                "patch": op("Change query, name or keep; new_url=true replaces the feed URL",
                            {"200": _answer("OK", subscription)},
                            _json_body({"type": "object", "properties": {
                                **_SUB_FIELDS, "new_url": {"type": "boolean"}}},
                                required=False)),
                "delete": op("Delete a subscription (its feed URL stops working)",
                             {"204": _answer("Deleted")})},
            "/api/subscriptions/{id}/entries": {
                **sub_path, "get": op("The entries its feed holds now", {"200": _answer(
                    "OK", _object(("entries",), entries={"type": "array",
                                                         "items": _ref("Entry")}))})},
            "/api/subscriptions/{id}/websub": {
                **sub_path, "get": op("Who subscribed to its private feed over WebSub",
                                      {"200": _answer("OK", _object(
                                          ("subscribers",), subscribers={
                                              "type": "array",
                                              "items": _ref("WebSubSubscriber")}))})},
            "/api/subscriptions/{id}/websub/{target}": {
                **target_path,
                "patch": op("Choose the X-Hub-Signature method of a WebSub subscriber's "
                            "deliveries (sha256 by default; sha1 for PubSubHubbub 0.4 "
                            "subscribers that check only sha1); kept when it subscribes again",
                            {"200": _answer("OK", _object(
                                ("subscriber",), subscriber=_ref("WebSubSubscriber")))},
                            _json_body(_object(("signature",), signature={
                                "type": "string", "enum": list(SIGNATURE_METHODS)})))},
            "/api/subscriptions/{id}/websub/{target}/deliveries": {
                **target_path,
                "get": op("A WebSub subscriber's delivery log, newest first",
                          {"200": _answer("OK", _object(
                              ("deliveries",), deliveries={"type": "array",
                                                           "items": _ref("Delivery")}))})},
            "/api/subscriptions/{id}/webhooks": {
                **sub_path,
                "get": op("Its webhooks, each with its last deliveries", {"200": _answer(
                    "OK", _object(("webhooks",), webhooks={"type": "array",
                                                           "items": _ref("Webhook")}))}),
                "post": op("Add a webhook: new entries are POSTed to url as JSON, signed with "
                           "the secret in the answer (X-Feedmesh-Signature)",
                           {"201": _answer("Created (or the one already at url)", webhook),
                            **_LIMIT},
                           _json_body({"type": "object", "required": ["url"], "properties": {
                               "url": _PUSH_URL}}))},
            "/api/subscriptions/{id}/webhooks/{hook}": {
                **hook_path, "delete": op("Remove a webhook", {"204": _answer("Removed")})},
            "/api/subscriptions/{id}/webhooks/{hook}/deliveries": {
                **hook_path, "get": op("The webhook's delivery log, newest first",
                                       {"200": _answer("OK", _object(
                                           ("deliveries",), deliveries={
                                               "type": "array",
                                               "items": _ref("Delivery")}))})},
            "/api/subscriptions/{id}/webhooks/{hook}/test": {
                **hook_path, "post": op("Send a test delivery (no entries), in order behind "
                                        "what waits; its outcome shows in the log",
                                        {"202": _answer("Queued", _object(
                                            ("queued", "webhook"), queued={"type": "boolean"},
                                            webhook=_ref("Webhook")))})},
            "/api/subscriptions.opml": {"get": {
                **op("Every private feed of yours in one OPML file, for a reader to import",
                     {"200": {"description": "OPML, one outline per subscription", "content": {
                         "text/x-opml": {"schema": _STR}}}}),
                "parameters": [{"name": "format", "in": "query", "required": False,
                                "schema": {"type": "string", "enum": ["rss", "atom", "json"],
                                           "default": "rss"},
                                "description": "RSS reads everywhere; JSON Feed only in readers "
                                               "that list it (newsboat does not)"}]}},
            "/api/sources": {
                "get": op("Source feeds you added", {"200": _answer("OK", _object(
                    ("sources",), sources={"type": "array", "items": _ref("Source")}))}),
                "post": op("Add a source feed to crawl",
                           {"201": _answer("Added", _object(("source",),
                                                            source=_ref("Source"))),
                            "200": _answer("Already followed; nothing changed", _object(
                                ("source",), source=_ref("Source"))), **_LIMIT},
                           _json_body({"type": "object", "required": ["url"], "properties": {
                               "url": {"type": "string", "maxLength": 2000,
                                       "pattern": "^\\s*[Hh][Tt][Tt][Pp][Ss]?://"},
                               "title": {"type": "string", "maxLength": 200}}}))},
            "/api/sources/{id}": {**sub_path, "delete": op("Stop following a source feed",
                                                           {"204": _answer("Removed")})},
            "/api/opml": {
                "get": op("Your sources as OPML", {"200": {
                    "description": "OPML", "content": {"text/x-opml": {"schema": _STR}}}}),
                "post": op("Import sources from OPML (body: the OPML document), with their "
                           "folders and sites; outlines that are not http(s) feeds are "
                           "skipped and listed",
                           {"200": _answer("Imported", _object(
                               ("added", "already_followed", "sources", "skipped"),
                               added={"type": "integer"},
                               already_followed={"type": "integer"},
                               sources={"type": "array", "items": _ref("Source")},
                               skipped={"type": "array", "items": _STR})), **_LIMIT},
                           {"required": True, "content": {
                               kind: {"schema": _STR, "example": _OPML_EXAMPLE}
                               for kind in ("text/xml", "application/xml", "text/x-opml")}})},
            "/api/preview": {"post": op(
                "Match a query against the most recent stored entries, without saving it",
                {"200": _answer("OK", _object(
                    ("normalized", "searched", "matched", "matches"), normalized=_STR,
                    searched={"type": "integer"}, matched={"type": "integer"},
                    matches={"type": "array", "items": _ref("Match")}))},
                _json_body({"type": "object", "required": ["query"],
                            "properties": {"query": _QUERY}}))},
            "/api/stats": {"get": op("Hub figures (feeds, subscriptions, queues, metrics)",
                                     {"200": _answer("OK", _object(
                                         ("feeds", "subscriptions", "entries_stored", "queues",
                                          "metrics"),
                                         feeds={"type": "integer"},
                                         subscriptions={"type": "integer"},
                                         entries_stored={"type": "integer"},
                                         queues={"type": "object"},
                                         metrics={"type": "object"}))},
                                     secured=False)},
            "/hub": {"post": {
                "summary": "WebSub hub of the private feeds: subscribe a callback to a feed "
                           "(hub.topic: one of its private URLs); intent is verified at the "
                           "callback, then each update of the feed is POSTed to it",
                "requestBody": {"required": True, "content": {
                    "application/x-www-form-urlencoded": {"schema": _object(
                        ("hub.mode", "hub.topic", "hub.callback"), **{
                            "hub.mode": {"type": "string",
                                         "enum": ["subscribe", "unsubscribe"]},
                            "hub.topic": {"type": "string", "minLength": 1, "maxLength": 2000,
                                          "description": "one of this hub's private feed URLs "
                                                         "(anything else: 404 unknown_topic)"},
                            "hub.callback": _PUSH_URL,
                            "hub.lease_seconds": {"type": "string", "pattern": "^[0-9]{1,12}$"},
                            "hub.secret": {"type": "string", "maxLength": 199,
                                           "pattern": "^[ -~]*$"}})}}},
                "responses": {
                    "202": {"description": "Accepted; intent is being verified",
                            "content": {"text/plain": {"schema": _STR}}},
                    **{code: _answer(text, _ref("Error")) for code, text in (
                        ("400", "Malformed request, or a callback the address guard refuses"),
                        ("403", "The feed has as many subscribers as it may"),
                        ("404", "The topic is not a private feed of this hub"),
                        ("413", "Body too large"), ("415", "Body is not a form"),
                        ("429", "Rate limited; see Retry-After"),
                        ("503", ("Push is not served by this process (push_unavailable), or "
                                 "storage is unavailable; see Retry-After")))}}}},
            "/hub/deliveries": {"get": {
                "summary": "The delivery log of one WebSub subscription, for whoever holds "
                           "its topic and its callback",
                # ASCII and bounded: the request line stays within what the server reads.
                "parameters": [{"name": name, "in": "query", "required": True,
                                "schema": {"type": "string", "minLength": 1,
                                           "maxLength": longest, "pattern": "^[!-~]*$"}}
                               for name, longest in (("hub.topic", 300),
                                                     ("hub.callback", 2000))],
                "responses": {
                    "200": _answer("OK", _object(("topic", "subscriber"), topic=_STR,
                                                 subscriber=_ref("WebSubSubscriber"))),
                    **{code: _answer(text, _ref("Error")) for code, text in (
                        ("400", "hub.topic or hub.callback missing"),
                        ("404", ("The topic is not a private feed of this hub, or the callback "
                                 "has no subscription to it")),
                        ("429", "Rate limited; see Retry-After"),
                        ("503", ("Push is not served by this process, or storage is "
                                 "unavailable")))}}}},
            "/f/{token}": {"get": {
                "summary": "A subscription's private feed (append .rss, .atom or .json, or "
                           "choose with Accept)",
                "parameters": [{"name": "token", "in": "path", "required": True,
                                "schema": _STR}],
                "responses": {"200": {"description": "The feed", "content": {
                                  "application/rss+xml": {"schema": _STR},
                                  "application/atom+xml": {"schema": _STR},
                                  "application/feed+json": {"schema": _object(
                                      ("version", "title", "items"), version=_STR, title=_STR,
                                      items={"type": "array"})}}},
                              "304": {"description": "Not modified"},
                              "404": _answer("No such feed", _ref("Error")),
                              "429": _answer("Polled too often", _ref("Error"))}}},
            "/f/{token}/archive/{page}": {"get": {
                "summary": "An archive page of a private feed (RFC 5005): older matches, as "
                           "linked by prev-archive (JSON Feed: next_url); <key>.rss|.atom|.json",
                "parameters": [{"name": name, "in": "path", "required": True, "schema": _STR}
                               for name in ("token", "page")],
                "responses": {"200": {"description": "The archive page (it does not change as "
                                                     "new matches arrive)", "content": {
                                  "application/rss+xml": {"schema": _STR},
                                  "application/atom+xml": {"schema": _STR},
                                  "application/feed+json": {"schema": _object(
                                      ("version", "title", "items"), version=_STR, title=_STR,
                                      items={"type": "array"})}}},
                              "304": {"description": "Not modified"},
                              "404": _answer("No such feed, or a page key the hub did not make",
                                             _ref("Error")),
                              "429": _answer("Polled too often", _ref("Error"))}}},
        },
    }
