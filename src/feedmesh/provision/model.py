"""The resource model: what one feed, one article and one subscription cost each tier.

A model file is JSON (docs/provisioning.md lists every field); ``feedmesh provision calibrate``
writes it from feedmesh's own benchmark outputs. CPU figures are core-seconds of the machine named
in ``machine``: a node of CPU constraint ``x`` does that work ``x`` times as fast (Cobra 3.5's
dimensionless CPU constraint).
"""

from __future__ import annotations

import msgspec

from .errors import ModelError, ModelVersionError

__all__ = ["MODEL_VERSION", "CrawlerCosts", "FilterCosts", "Machine", "ReflectorCosts",
           "ResourceModel", "Workload", "decode_model", "encode_model"]

MODEL_VERSION = 2
READABLE_VERSIONS = (1, 2)
"""Version 2 added ``workload.held_per_answer`` and ``reflector.bytes_per_poll_item``; a version
1 file reads as a version 2 one without them (full feeds, answers of one size)."""


class Machine(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    cpu_model: str
    cores: int
    measured_at: str  # ISO date


class Workload(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    crawl_interval_s: float = 900.0  # Cobra's 15 minutes
    poll_interval_s: float = 1800.0  # readers poll every 15-60 minutes (Cobra 3.3)
    held_per_subscription: int = 10  # k, the newest entries a private feed keeps
    held_per_answer: float | None = None
    """Entries a private feed holds on average. None: k, the steady state a plan is for (every
    subscription that matches at all fills its k in time); a hub minutes old holds fewer, which
    is what its readers get and its reflectors keep (`benchmarks/provision_check.py`)."""

    @property
    def held(self) -> float:
        return (float(self.held_per_subscription) if self.held_per_answer is None
                else self.held_per_answer)


class CrawlerCosts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    bytes_in_per_feed_per_crawl: float  # on the wire, with conditional GET and deltas
    bytes_out_per_feed_per_crawl: float  # new articles only (after per-entry dedup), as sent
    articles_per_feed_per_crawl: float  # new entries per feed per crawl
    cpu_s_per_feed_per_crawl: float
    memory_bytes_per_feed: float
    memory_base_bytes: float
    cpu_s_per_s_base: float = 0.0  # a process's fixed CPU, whatever its share (timers, bus)


class FilterCosts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    cpu_s_per_article: float  # whatever the subscriptions: decoding, tokenizing, sending
    cpu_s_per_article_per_ksubs: float
    memory_bytes_per_subscription: float  # the index
    memory_base_bytes: float
    matches_per_article_per_subscription: float  # p: an article matches a subscription
    bytes_per_match_message: float  # one matched article, filter -> reflector
    cpu_s_per_s_base: float = 0.0


class ReflectorCosts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    cpu_s_per_article: float
    cpu_s_per_article_per_ksubs: float  # re-matching (Cobra's final design, our `article`)
    memory_bytes_per_subscription: float  # re-match index and subscription columns
    memory_bytes_per_held_entry: float  # one (subscription, entry) row of a private feed
    memory_base_bytes: float
    bytes_per_poll_answer: float  # one private feed holding k entries answered to a reader
    cpu_s_per_s_base: float = 0.0
    cpu_s_per_poll: float = 0.0  # answering one reader's poll that finds news (lookup, render)
    bytes_per_poll_item: float = 0.0  # what each entry held adds to an answer (0: not measured)


class ResourceModel(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    machine: Machine
    workload: Workload
    crawler: CrawlerCosts
    filter: FilterCosts
    reflector: ReflectorCosts
    source: dict[str, str] = {}  # field path -> how it was measured (command, key)

    def __post_init__(self) -> None:
        for tier in ("crawler", "filter", "reflector"):
            for field in getattr(self, tier).__struct_fields__:
                value = getattr(getattr(self, tier), field)
                if not value >= 0:  # also catches NaN
                    raise ModelError(f"{tier}.{field} must be >= 0, got {value}")
        if self.filter.matches_per_article_per_subscription > 1:
            raise ModelError("filter.matches_per_article_per_subscription is a probability: "
                             f"<= 1, got {self.filter.matches_per_article_per_subscription}")
        if self.workload.crawl_interval_s <= 0 or self.workload.poll_interval_s <= 0:
            raise ModelError("workload intervals must be > 0 seconds")


def decode_model(data: bytes, where: str = "model") -> ResourceModel:
    """A model from its JSON; the version is checked first, so an unknown version is named as
    such rather than as a missing field."""
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ModelError(f"{where}: not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ModelError(f"{where}: a model is a JSON object")
    version = raw.get("version")
    if version not in READABLE_VERSIONS:
        raise ModelVersionError(f"{where}: model version {version!r} is not known to this "
                                f"feedmesh (it reads versions "
                                f"{', '.join(map(str, READABLE_VERSIONS))}); re-run "
                                "`feedmesh provision calibrate` to write a current one")
    if version == 1:
        for section, field in (("workload", "held_per_answer"),
                               ("reflector", "bytes_per_poll_item")):
            if isinstance(raw.get(section), dict) and field in raw[section]:
                raise ModelError(f"{where}: {section}.{field} is a version 2 field; a "
                                 "version 1 model cannot have it")
        raw["version"] = MODEL_VERSION
    try:
        return msgspec.convert(raw, ResourceModel)
    except msgspec.ValidationError as exc:
        raise ModelError(f"{where}: {exc}") from exc


def encode_model(model: ResourceModel) -> bytes:
    return msgspec.json.format(msgspec.json.encode(model), indent=2) + b"\n"
