"""JSON Feed 1.1 checked against a JSON Schema transcribed from the spec
(https://www.jsonfeed.org/version/1.1/), with an independent validator (jsonschema-rs).

feedparser 6.0.x, the newest release, reads RSS and Atom but not JSON Feed, so the JSON format
gets this schema instead: every required field, every type, RFC 3339 dates, and the rule that an
item has ``content_html`` or ``content_text``. Extensions (keys starting with ``_``) are allowed.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs

__all__ = ["JSON_FEED_1_1", "validate_json_feed"]

_URL = {"type": "string", "minLength": 1}
_AUTHOR = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "url": _URL, "avatar": _URL},
    "anyOf": [{"required": ["name"]}, {"required": ["url"]}, {"required": ["avatar"]}],
}
_ITEM = {
    "type": "object",
    "required": ["id"],
    "anyOf": [{"required": ["content_html"]}, {"required": ["content_text"]}],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "url": _URL, "external_url": _URL,
        "title": {"type": "string"},
        "content_html": {"type": "string"}, "content_text": {"type": "string"},
        "summary": {"type": "string"},
        "image": _URL, "banner_image": _URL,
        "date_published": {"type": "string", "format": "date-time"},
        "date_modified": {"type": "string", "format": "date-time"},
        "authors": {"type": "array", "items": _AUTHOR},
        "author": _AUTHOR,  # 1.0's field, deprecated but allowed in 1.1
        "tags": {"type": "array", "items": {"type": "string"}},
        "language": {"type": "string"},
        "attachments": {"type": "array", "items": {
            "type": "object", "required": ["url", "mime_type"],
            "properties": {"url": _URL, "mime_type": {"type": "string"},
                           "title": {"type": "string"},
                           "size_in_bytes": {"type": "number"},
                           "duration_in_seconds": {"type": "number"}}}},
    },
    "patternProperties": {"^_": {}},
    "additionalProperties": False,
}
JSON_FEED_1_1: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["version", "title", "items"],
    "properties": {
        "version": {"const": "https://jsonfeed.org/version/1.1"},
        "title": {"type": "string"},
        "home_page_url": _URL, "feed_url": _URL, "next_url": _URL,
        "description": {"type": "string"}, "user_comment": {"type": "string"},
        "icon": _URL, "favicon": _URL,
        "authors": {"type": "array", "items": _AUTHOR},
        "author": _AUTHOR,
        "language": {"type": "string"},
        "expired": {"type": "boolean"},
        "hubs": {"type": "array", "items": {"type": "object", "required": ["type", "url"]}},
        "items": {"type": "array", "items": _ITEM},
    },
    "patternProperties": {"^_": {}},
    "additionalProperties": False,
}

_VALIDATOR = jsonschema_rs.validator_for(JSON_FEED_1_1, validate_formats=True)


def validate_json_feed(body: bytes) -> dict[str, Any]:
    """The parsed document; AssertionError listing every violation of the spec's schema."""
    doc = json.loads(body)
    problems = [f"{'/'.join(map(str, e.instance_path))}: {e.message}"
                for e in _VALIDATOR.iter_errors(doc)]
    assert not problems, "not JSON Feed 1.1:\n" + "\n".join(problems[:20])
    ids = [item["id"] for item in doc["items"]]
    assert len(ids) == len(set(ids)), "JSON Feed item ids must be unique"
    return doc
