"""Who the farm's feeds are: every feed's attributes, drawn at once with numpy from the seed.

For 100k feeds the catalog costs a few milliseconds and a few MB (one small array per attribute);
a :class:`FeedSpec` object is built only when a feed is first asked for. Each attribute is drawn
from its own counter-based uniform (:func:`feedmesh.farm.rand.units`), so feed 7 of a 10-feed farm
is feed 7 of a 100k-feed farm with the same seed (only the host and fault spread depend on the
farm's size and mix).

Statistics targeted here (Cobra, Figure 5): a median of 10 entries per feed with a 90th percentile
of 17; article lengths set per feed (some feeds send snippets, others whole articles) and varied
per article so that a median article has ~61 words / ~770 bytes; see
``tests/farm/test_statistics.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from feedmesh.farm.config import FarmConfig, host_address
from feedmesh.farm.faults import Fault
from feedmesh.farm.posting import PROFILE_NAMES, PROFILES, rates_from_units
from feedmesh.farm.rand import normals, unit, units
from feedmesh.farm.words import vocabulary

__all__ = ["BODY_WORDS_MEDIAN", "FeedCatalog", "FeedSpec"]

BODY_WORDS_MEDIAN = 52  # words of an article's body for the median feed (a title adds ~7)
FEED_WORDS_SIGMA = 1.1  # spread of article length between feeds (log scale)
ARTICLE_WORDS_SIGMA = 0.7  # spread within a feed
_TTL_CHOICES = np.array([15, 30, 60, 120, 180, 360, 720, 1440])
_MAX_AGE_CHOICES = (300, 900, 1800, 3600)
_LANGUAGES = ("en", "en-us", "en-gb")
_TITLE_SUFFIXES = ("News", "Daily", "Journal", "Blog", "Notes", "Weekly", "Review", "Digest",
                   "Times", "Report", "Post", "Log")

# Salts: one per attribute, so attributes are independent draws.
(_S_RATE, _S_PROFILE, _S_FORMAT, _S_VALID, _S_DELTA, _S_COMP, _S_MAXAGE, _S_TTL, _S_CAP, _S_CAP2,
 _S_WORDS, _S_FANCY, _S_PODCAST, _S_PERMA, _S_FAULT, _S_SKIP, _S_LANG, _S_TITLE,
 _S_MAXAGE2) = range(101, 120)


@dataclass(frozen=True, slots=True)
class FeedSpec:
    """Everything fixed about one farm feed (what changes over time lives in the documents)."""

    id: int
    host_index: int
    host: str
    """Loopback address the feed is served on."""
    path: str
    format: str
    title: str
    rate_per_day: float
    profile: str
    entries_cap: int
    validators: str
    """``both``, ``etag``, ``last_modified`` or ``none``: what conditional GET it honours."""
    delta: bool
    """Serves RFC 3229 deltas (``A-IM: feed`` -> 226)."""
    compression: str
    """``none``, ``gzip``, ``br`` or ``gzip+br``."""
    max_age_s: int | None
    ttl_minutes: int | None
    skip_hours: tuple[int, ...]
    fault: Fault
    language: str
    words_median: float
    fancy: bool
    """Uses typographic quotes and dashes (non-ASCII text)."""
    podcast: bool
    permalink_guids: bool
    seed: int

    @property
    def etag(self) -> bool:
        return self.validators in ("both", "etag")

    @property
    def last_modified(self) -> bool:
        return self.validators in ("both", "last_modified")


def _choose(u: np.ndarray, mix: dict[str, float]) -> np.ndarray:
    """Index into ``list(mix)`` per uniform, by the mix's shares."""
    shares = np.asarray(list(mix.values()), dtype=np.float64)
    cdf = np.cumsum(shares / shares.sum())
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(shares) - 1)


class FeedCatalog:
    """Attributes of feeds ``0 .. config.feeds - 1``; :meth:`spec` builds (and keeps) a FeedSpec."""

    def __init__(self, config: FarmConfig) -> None:
        self.config = config
        seed = config.seed
        n = config.feeds
        ids = np.arange(n, dtype=np.int64)
        self._formats = list(config.format_mix)
        self._validators = list(config.validator_mix)
        self._compressions = list(config.compression_mix)
        self.rates = rates_from_units(units(seed, _S_RATE, ids))
        self.profiles = (units(seed, _S_PROFILE, ids) * len(PROFILE_NAMES)).astype(np.int8)
        self.formats = _choose(units(seed, _S_FORMAT, ids), config.format_mix).astype(np.int8)
        self.validators = _choose(units(seed, _S_VALID, ids), config.validator_mix).astype(np.int8)
        self.compressions = _choose(units(seed, _S_COMP, ids),
                                    config.compression_mix).astype(np.int8)
        self.caps = self._entry_caps(units(seed, _S_CAP, ids), units(seed, _S_CAP2, ids))
        self.words = BODY_WORDS_MEDIAN * np.exp(FEED_WORDS_SIGMA * normals(seed, _S_WORDS, ids))
        self.faults = self._faults(units(seed, _S_FAULT, ids))
        self._specs: list[FeedSpec | None] = [None] * n

    @staticmethod
    def _entry_caps(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """How many entries a feed lists: 10 for half the feeds, fewer for a quarter, more for a
        quarter (10 + an exponential tail of mean 8, at most 60): median 10, 90th percentile ~17."""
        few = 1 + (v * 9).astype(np.int64)
        many = np.minimum(60, 10 + np.ceil(-8.0 * np.log1p(-v))).astype(np.int64)
        return np.where(u < 0.25, few, np.where(u < 0.75, 10, many)).astype(np.int16)

    def _faults(self, u: np.ndarray) -> list[Fault]:
        mix = self.config.fault_mix()
        kinds = list(mix)
        shares = np.asarray([mix[k] for k in kinds], dtype=np.float64)
        cdf = np.cumsum(shares)
        index = np.searchsorted(cdf, u, side="right")
        table = [*kinds, Fault.NONE]
        faults = [table[i] for i in index.tolist()] if kinds else [Fault.NONE] * len(u)
        for feed_id, fault in self.config.overrides().items():
            faults[feed_id] = fault
        return faults

    def __len__(self) -> int:
        return self.config.feeds

    def spec(self, feed_id: int) -> FeedSpec:
        """The spec of feed ``feed_id``; IndexError if the farm has no such feed."""
        if not 0 <= feed_id < self.config.feeds:
            raise IndexError(f"feed {feed_id} does not exist (the farm has {self.config.feeds})")
        spec = self._specs[feed_id]
        if spec is None:
            spec = self._specs[feed_id] = self._build(feed_id)
        return spec

    @staticmethod
    def _title(offset: int) -> str:
        name = vocabulary().title(offset, 1 + offset % 3)
        return f"{name} {_TITLE_SUFFIXES[offset % len(_TITLE_SUFFIXES)]}"

    def listing(self) -> list[tuple[int, str, str, str]]:
        """(id, title, format, host) of every feed, without building specs (for /opml)."""
        config = self.config
        ids = np.arange(config.feeds, dtype=np.int64)
        offsets = (units(config.seed, _S_TITLE, ids) * vocabulary().size).astype(np.int64)
        hosts = [host_address(h, config.hosts) for h in range(config.hosts)]
        return [(i, self._title(offset), self._formats[fmt], hosts[i % config.hosts])
                for i, (offset, fmt) in enumerate(zip(offsets.tolist(), self.formats.tolist(),
                                                      strict=True))]

    def _build(self, i: int) -> FeedSpec:
        config, seed = self.config, self.config.seed

        def draw(salt: int) -> float:
            return unit(seed, i, salt)  # the scalar twin of units(), same value

        rate = float(self.rates[i])
        fmt = self._formats[self.formats[i]]
        validators = self._validators[self.validators[i]]
        fault = self.faults[i]
        if fault is Fault.CHANGING_GUIDS:
            validators = "none"  # its document changes on every fetch: nothing to validate
        profile_name = PROFILE_NAMES[self.profiles[i]]
        profile = PROFILES[profile_name]
        has_etag = validators in ("both", "etag")
        max_age = None
        if draw(_S_MAXAGE) < config.max_age_share:
            max_age = _MAX_AGE_CHOICES[int(draw(_S_MAXAGE2) * len(_MAX_AGE_CHOICES))]
        ttl = None
        if draw(_S_TTL) < config.ttl_share:
            # Half the mean gap between posts, snapped to the values publishers use.
            wanted = 1440.0 / rate / 2.0
            ttl = int(_TTL_CHOICES[np.abs(_TTL_CHOICES - wanted).argmin()])
        skip_hours: tuple[int, ...] = ()
        if draw(_S_SKIP) < config.skip_hours_share:
            skip_hours = tuple(h for h in range(24) if profile[h] < 0.4)
        title = self._title(int(draw(_S_TITLE) * vocabulary().size))
        cap = int(self.caps[i])
        if fault is Fault.FLOOD:
            cap = config.flood_entries
        return FeedSpec(
            id=i, host_index=i % config.hosts, host=host_address(i % config.hosts, config.hosts),
            path=f"/feeds/{i}", format=fmt, title=title, rate_per_day=rate, profile=profile_name,
            entries_cap=cap, validators=validators,
            delta=has_etag and draw(_S_DELTA) < config.delta_share,
            compression=self._compressions[self.compressions[i]], max_age_s=max_age,
            ttl_minutes=ttl, skip_hours=skip_hours, fault=fault,
            language=_LANGUAGES[int(draw(_S_LANG) * 3)], words_median=float(self.words[i]),
            fancy=fault in (Fault.WRONG_CHARSET, Fault.UTF16) or draw(_S_FANCY) < 0.15,
            podcast=draw(_S_PODCAST) < 0.05, permalink_guids=draw(_S_PERMA) < 0.4, seed=seed)
