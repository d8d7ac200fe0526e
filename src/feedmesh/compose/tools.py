"""Small jobs a command runs on a hub's state without running the hub: the keys of private feed
URLs (``feedmesh url-key``) and every push target's delivery log (``feedmesh deliveries``)."""

from __future__ import annotations

from feedmesh.compose.engines import existing_hub_state
from feedmesh.fetch.redact import redact_credentials
from feedmesh.hub.front.tokens import key_fingerprint

__all__ = ["delivery_logs", "key_fingerprint", "redact_credentials"]


def delivery_logs(location: str, *, last: int, failing: bool) -> list[dict]:
    """Every WebSub subscription's and webhook's last ``last`` delivery attempts, newest first,
    read from the hub's state at ``location`` (``failing``: only the targets whose last attempt
    failed); URLs without their credentials."""
    state, _ = existing_hub_state(location)
    try:
        targets = state.push_targets()
        attempts = {t.id: state.push_attempts(t.id, last) for t in targets}
    finally:
        state.close()
    rows = []
    for target in targets:
        log = attempts.get(target.id, [])
        if failing and not (log and not 200 <= log[0].status < 300):
            continue
        rows.append({"id": target.id, "kind": target.kind, "subscription": target.sub_id,
                     "url": redact_credentials(target.url), "expires_at": target.expires_at,
                     "deliveries": [{"at": a.at, "attempt": a.attempt, "status": a.status,
                                     "error": a.error, "entries": a.entries,
                                     "elapsed_ms": a.elapsed_ms} for a in log]})
    return rows
