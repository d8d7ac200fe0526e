"""The OpenAPI 3.1 description of the JSON API, served at ``/api/openapi.json``."""

from __future__ import annotations

from typing import Any

from feedmesh import __version__

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
)}

_SUB_FIELDS = {
    "query": {"type": "string", "maxLength": 1000,
              "description": "e.g. (law AND internet) OR privacy; see docs/queries.md"},
    "name": {"type": "string", "maxLength": 200},
    "keep": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
             "description": "entries kept in the feed"},
}


def openapi(base_url: str) -> dict[str, Any]:
    auth = [{"bearer": []}]
    sub_path = {"parameters": [{"name": "id", "in": "path", "required": True,
                                "schema": {"type": "integer"}}]}

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
                                "private feed."},
        "servers": [{"url": base_url}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                    "type": "object", "required": ["status", "code", "message"],
                    "properties": {"status": {"type": "integer"}, "code": {"type": "string"},
                                   "message": {"type": "string"},
                                   "position": {"type": ["integer", "null"]},
                                   "hint": {"type": "string"}}}}},
                "Account": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "name": {"type": "string"},
                    "created_at": {"type": "number"}}},
                "Subscription": {"type": "object", "properties": {
                    "id": {"type": "integer"}, **_SUB_FIELDS,
                    "normalized": {"type": "string"},
                    "created_at": {"type": "number"}, "changed_at": {"type": "number"},
                    "feed_urls": {"type": "object", "properties": {
                        "rss": {"type": "string"}, "atom": {"type": "string"},
                        "json": {"type": "string"}}}}},
                "Source": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "url": {"type": "string"},
                    "title": {"type": "string"}, "active": {"type": "boolean"},
                    "last_outcome": {"type": "string"}, "last_error": {"type": "string"}}},
            },
        },
        "paths": {
            "/api/accounts": {"post": op(
                "Create an account; the answer holds its API token (shown once)",
                {"201": _answer("Created", {"type": "object", "properties": {
                    "account": _ref("Account"), "token": {"type": "string"}}})},
                _json_body({"type": "object", "properties": {
                    "name": {"type": "string", "maxLength": 100}}}, required=False),
                secured=False)},
            "/api/accounts/me": {"get": op("Your account", {"200": _answer("OK")})},
            "/api/accounts/me/token": {"post": op(
                "Replace your API token (the old one stops working)", {"200": _answer("OK")})},
            "/api/subscriptions": {
                "get": op("Your subscriptions", {"200": _answer("OK", {
                    "type": "object", "properties": {"subscriptions": {
                        "type": "array", "items": _ref("Subscription")}}})}),
                "post": op("Create a subscription; the answer carries its private feed URLs",
                           {"201": _answer("Created", {"type": "object", "properties": {
                               "subscription": _ref("Subscription")}}),
                            "403": _answer("Subscription limit reached", _ref("Error"))},
                           _json_body({"type": "object", "required": ["query"],
                                       "properties": _SUB_FIELDS}))},
            "/api/subscriptions/{id}": {
                **sub_path,
                "get": op("One subscription", {"200": _answer("OK")}),
                "patch": op("Change query, name or keep; new_url=true replaces the feed URL",
                            {"200": _answer("OK")},
                            _json_body({"type": "object", "properties": {
                                **_SUB_FIELDS, "new_url": {"type": "boolean"}}})),
                "delete": op("Delete a subscription (its feed URL stops working)",
                             {"204": _answer("Deleted")})},
            "/api/subscriptions/{id}/entries": {
                **sub_path, "get": op("The entries its feed holds now", {"200": _answer("OK")})},
            "/api/sources": {
                "get": op("Source feeds you added", {"200": _answer("OK", {
                    "type": "object", "properties": {"sources": {
                        "type": "array", "items": _ref("Source")}}})}),
                "post": op("Add a source feed to crawl", {"201": _answer("Added")},
                           _json_body({"type": "object", "required": ["url"], "properties": {
                               "url": {"type": "string", "maxLength": 2000},
                               "title": {"type": "string"}}}))},
            "/api/sources/{id}": {**sub_path, "delete": op("Stop following a source feed",
                                                           {"204": _answer("Removed")})},
            "/api/opml": {
                "get": op("Your sources as OPML", {"200": {
                    "description": "OPML", "content": {"text/x-opml": {}}}}),
                "post": op("Import sources from OPML (body: the OPML document)",
                           {"200": _answer("Imported")},
                           {"required": True, "content": {"text/xml": {}, "application/xml": {},
                                                          "text/x-opml": {}}})},
            "/api/preview": {"post": op(
                "Match a query against the most recent stored entries, without saving it",
                {"200": _answer("OK")}, _json_body({"type": "object", "required": ["query"],
                                                    "properties": {"query": _SUB_FIELDS["query"]}
                                                    }))},
            "/api/stats": {"get": op("Hub figures (feeds, subscriptions, queues, metrics)",
                                     {"200": _answer("OK")}, secured=False)},
            "/f/{token}": {"get": {
                "summary": "A subscription's private feed (append .rss, .atom or .json, or "
                           "choose with Accept)",
                "parameters": [{"name": "token", "in": "path", "required": True,
                                "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The feed"},
                              "304": {"description": "Not modified"},
                              "404": _answer("No such feed", _ref("Error")),
                              "429": _answer("Polled too often", _ref("Error"))}}},
        },
    }
