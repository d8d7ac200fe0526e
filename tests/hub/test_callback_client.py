"""What the hub's callback client says when it cannot deliver: enough for the owner of a callback
to mend it, nothing more (no private feed URL, no address a name resolved to inside the hub)."""

from __future__ import annotations

import pytest

from feedmesh.fetch.guard import StaticResolver
from feedmesh.fetch.settings import FetchSettings
from feedmesh.hub.push.http import CallbackClient, CallbackError, shown_url


async def test_a_name_resolving_inside_the_hubs_network_is_refused_without_the_address():
    client = CallbackClient(FetchSettings(), resolver=StaticResolver({"hooks.test": "10.1.2.3"}))
    try:
        with pytest.raises(CallbackError) as refused:
            await client.post("http://hooks.test/cb", b"{}", {})
    finally:
        await client.close()
    message = str(refused.value)
    assert "refused by the address guard" in message
    assert "10.1.2.3" not in message and "private" not in message  # no DNS oracle


def test_shown_urls_lose_their_query_fragment_and_password():
    shown = shown_url("http://u:pw@cb.test:8080/hook?hub.topic=http%3A%2F%2Fhub%2Ff%2FSECRET#x")
    assert shown == "http://u:***@cb.test:8080/hook"
    assert shown_url("not a url") == "(an invalid URL)"
