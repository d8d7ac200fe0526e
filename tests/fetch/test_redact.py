"""Credentials in a feed URL are used to fetch, and shown nowhere."""

from __future__ import annotations

import pytest

from feedmesh.fetch import Fetcher, HandlerResponse, HandlerTransport
from feedmesh.fetch.redact import redact_credentials


@pytest.mark.parametrize("text, shown", [
    ("https://ann:hunter2@example.org/feed: HTTP 500",
     "https://ann:***@example.org/feed: HTTP 500"),
    ("http://a/b then https://u:p@h/x to http://v:q%40r@i/",
     ("http://a/b then https://u:***@h/x to http://v:***@i/")),
    ("https://ann@example.org/feed", "https://ann@example.org/feed"),  # a user name alone
    ("mailto:x@y.org and https://h/p?mail=a@b.c", "mailto:x@y.org and https://h/p?mail=a@b.c"),
    ("no url at all", "no url at all"),
])
def test_passwords_in_urls_are_replaced(text, shown):
    assert redact_credentials(text) == shown


async def test_a_failed_fetch_names_the_url_without_its_password():
    sent = []

    def site(request):
        sent.append(request)
        return HandlerResponse(500, b"down", reason="Internal Server Error")

    async with Fetcher(transport=HandlerTransport(site)) as fetcher:
        result = await fetcher.fetch("https://ann:hunter2@feeds.example/feed")
    assert sent[0].url.password == "hunter2"  # used to fetch
    assert "hunter2" not in result.error.message
    assert result.error.message.startswith("https://ann:***@feeds.example/feed: HTTP 500")
