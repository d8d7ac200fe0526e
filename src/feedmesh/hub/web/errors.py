"""One JSON shape for every error the web layer returns, and the middleware that guarantees it.

``{"error": {"status": 400, "code": "invalid_query", "message": "...", ...details}}``: ``code`` is
stable (clients branch on it), ``message`` says what, where and why for a person.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from feedmesh.errors import FeedmeshError
from feedmesh.hub.front.facade import FeedUnavailable, PushRefusedError
from feedmesh.logs import Throttled
from feedmesh.store import StorageFullError, StoreError

__all__ = ["ApiError", "error_middleware", "error_response"]

log = logging.getLogger("feedmesh.hub.web")
_storage_log = Throttled(log)
STORAGE_RETRY_S = 60
FEED_RETRY_S = 5
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

class ApiError(FeedmeshError):
    def __init__(self, status: int, code: str, message: str, **detail: object) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail
        self.headers: dict[str, str] = {}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None,
                   **detail: object) -> web.Response:
    body = {"error": {"status": status, "code": code, "message": message, **detail}}
    return web.Response(status=status, text=json.dumps(body), content_type="application/json",
                        headers=headers)


_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 413: "body_too_large", 415: "unsupported_media_type",
               429: "rate_limited"}
_KEPT_HEADERS = {"allow", "retry-after"}


def error_middleware(max_request_bytes: int) -> Callable:
    """Every failure as the API's JSON error shape (never a traceback); ``max_request_bytes``:
    the transport cap on request bodies, named in 413 answers."""

    @web.middleware
    async def answer_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        return await _answered(request, handler, max_request_bytes)

    return answer_errors


async def _answered(request: web.Request, handler: Handler,
                    limit: int) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.headers, **exc.detail)
    except PushRefusedError as exc:
        return error_response(exc.status, exc.code, exc.message, **exc.detail)
    except FeedUnavailable as exc:  # a reflector process is down or restarting
        _storage_log.log(logging.WARNING, "feed", "feed_unavailable method=%s path=%s error=%s",
                         request.method, request.path, exc)
        return error_response(503, "feed_unavailable", "this feed cannot be read right now; "
                              "retry in a few seconds.", {"Retry-After": str(FEED_RETRY_S)},
                              retry_after_s=FEED_RETRY_S)
    except StorageFullError as exc:
        # One line a minute, no traceback: the disk is full, not the code broken. Reads go on.
        _storage_log.log(logging.ERROR, "full", "storage_full method=%s path=%s error=%s",
                         request.method, request.path, exc)
        return error_response(503, "storage_full", "the hub cannot save changes now: its "
                              "storage is full. Reading works; retry later.",
                              {"Retry-After": str(STORAGE_RETRY_S)},
                              retry_after_s=STORAGE_RETRY_S)
    except StoreError as exc:
        _storage_log.log(logging.ERROR, type(exc).__name__,
                         "storage_failed method=%s path=%s error=%s", request.method,
                         request.path, exc)
        return error_response(503, "storage_unavailable", "the hub cannot reach its storage "
                              "now; retry later.", {"Retry-After": str(STORAGE_RETRY_S)},
                              retry_after_s=STORAGE_RETRY_S)
    except web.HTTPRequestEntityTooLarge:
        # aiohttp refused the body at its transport cap (the app's client_max_size).
        return error_response(413, "body_too_large",
                              f"request body is larger than the {limit}-byte limit", limit=limit)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "http_error")
        message = exc.text if exc.text and not exc.text.startswith(str(exc.status)) else exc.reason
        if exc.status == 404:
            message = f"no such resource: {request.method} {request.path}"
        elif exc.status == 405:
            message = f"{request.method} is not allowed on {request.path}"
        # aiohttp's exceptions carry their own text/plain Content-Type; keep only the headers a
        # client acts on (Allow on 405, Retry-After), since the body is ours.
        kept = {k: v for k, v in exc.headers.items() if k.lower() in _KEPT_HEADERS}
        return error_response(exc.status, code, message, kept or None)
    except Exception:
        log.exception("web_error method=%s path=%s", request.method, request.path)
        return error_response(500, "internal_error", "the server failed to answer this request; "
                              "it was logged")
