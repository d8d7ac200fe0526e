"""Every environment variable feedmesh reads, in one place: what it sets, and who reads it.

Nothing else in ``src/`` reads ``os.environ`` for a ``FEEDMESH_*`` name; a flag's default that
comes from the environment is read here (:func:`get`), when the flag is declared.
"""

from __future__ import annotations

import os

__all__ = ["VARIABLES", "get"]

VARIABLES = {
    "FEEDMESH_DATA": "the data folder of serve, crawler, filter, reflector, web, url-key, "
                     "deliveries and keys (default var; up and down: var-up)",
    "FEEDMESH_STORE": "the hub's PostgreSQL database (postgresql://...) for serve, reflector, "
                      "web, url-key and deliveries, instead of SQLite files",
    "FEEDMESH_BUS": "where serve's tiers meet: memory, or nats://HOST:PORT",
    "FEEDMESH_BUS_CREDENTIALS": "a role's NATS nkey seed file (0600) for crawler, filter, "
                                "reflector, web and map --apply (--bus-credentials)",
    "FEEDMESH_REFLECTOR_TOKEN_FILE": "the reflectors' API bearer token file (0600): asked by "
                                     "reflector (--token-file), sent by crawler and web",
    "FEEDMESH_PUBLIC_URL": "serve's --public-url: where publishers' WebSub hubs call back",
    "FEEDMESH_DB": "crawl's store: a SQLite file or a postgresql:// URL",
    "FEEDMESH_LOOP": "the event loop: uvloop (the default where installed) or asyncio",
    "FEEDMESH_FAILPOINTS": "failpoints armed in this process, for fault tests "
                           "(feedmesh.failpoints)",
    "FEEDMESH_PG_BINDIR": "where PostgreSQL's initdb and postgres are, for the server feedmesh "
                          "up and the tests start",
}


def get(name: str, default: str = "") -> str:
    """The value of the ``FEEDMESH_*`` variable ``name`` (``default`` when unset)."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not one of feedmesh's environment variables")
    return os.environ.get(name, default)
