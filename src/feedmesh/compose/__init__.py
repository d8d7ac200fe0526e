"""The one place that assembles: engines, one module per role, the embedded hub, one lifecycle.

* :mod:`.engines`: the concrete stores and buses, chosen by settings (nowhere else);
* :mod:`.settings`: every role's settings, and the parts' settings a command may set;
* one module per role, each building it from settings: :mod:`.crawler`, :mod:`.filter`,
  :mod:`.reflector` (with the push worker beside it), :mod:`.web`, :mod:`.peer`; and the hub's
  republisher (:mod:`.republish`);
* :mod:`.embedded`: every role of the one-process hub, with one front the web role is handed;
* :mod:`.serve`: ``feedmesh serve`` and ``feedmesh crawler`` as processes;
* :mod:`.lifecycle`: :func:`~.lifecycle.run_roles`, which owns signals, the supervision of every
  loop, the single ``/metrics`` endpoint, the wait for stream joins and the close order.

Commands (:mod:`feedmesh.commands`) read flags into settings and call in here; nothing outside
this package constructs a tier, a store or a bus.
"""

from feedmesh.compose.engines import (
    FEED_SECRET_FILE,
    FEED_SECRET_PREVIOUS_FILE,
    change_feed_url_keys,
    existing_hub_state,
    feed_url_keys,
    feed_url_tokens,
    folder_keys,
    is_database_url,
    open_archive,
    open_bus,
    open_feed_ownership,
    open_hub_state,
    open_ingest_store,
    open_reflector_log,
    private_feed_key,
)

__all__ = ["FEED_SECRET_FILE", "FEED_SECRET_PREVIOUS_FILE", "change_feed_url_keys",
           "existing_hub_state", "feed_url_keys", "feed_url_tokens", "folder_keys",
           "is_database_url", "open_archive", "open_bus", "open_feed_ownership",
           "open_hub_state", "open_ingest_store", "open_reflector_log", "private_feed_key"]
