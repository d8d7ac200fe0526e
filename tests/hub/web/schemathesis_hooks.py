"""Schemathesis hooks for the API fuzz test (loaded through ``SCHEMATHESIS_HOOKS``): every error
answer must have the one JSON error shape of :mod:`feedmesh.hub.web.errors`; an OPML body is sent
as the document it is (Schemathesis would wrap a string in an XML element of its own)."""

from __future__ import annotations

import schemathesis

__all__ = ["error_shape", "opml_as_sent"]


@schemathesis.serializer("text/x-opml", "text/xml", "application/xml")
def opml_as_sent(ctx: object, value: object) -> bytes:
    """The generated or example document, as bytes on the wire."""
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", errors="surrogatepass")


@schemathesis.check
def error_shape(ctx: schemathesis.CheckContext, response: schemathesis.Response,
                case: schemathesis.Case) -> bool | None:
    """A 4xx/5xx is ``{"error": {"status": <the status>, "code": "...", "message": "..."}}``
    sent as JSON, with Retry-After on 429 and Allow on 405."""
    status = response.status_code
    if status < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0]
    assert content_type.startswith("application/json"), \
        f"{status} answered as {content_type!r}, not JSON: {response.text[:200]!r}"
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, f"not the error shape: {body!r}"
    error = body["error"]
    assert error.get("status") == status, f"error.status {error.get('status')!r} != {status}"
    assert isinstance(error.get("code"), str) and error["code"], f"no error.code: {body!r}"
    assert isinstance(error.get("message"), str) and len(error["message"]) > 10, \
        f"no useful error.message: {body!r}"
    if status == 429:
        assert response.headers.get("retry-after"), "429 without Retry-After"
    if status == 405:
        assert response.headers.get("allow"), "405 without Allow"
    return None
