"""How often each term occurs in articles: the basis for choosing access predicates.

A conjunction is filed under its *most selective* term, the one that occurs in the fewest articles.
That frequency is estimated per term as

    estimate = (observed + prior_weight * prior) / (articles + prior_weight)

where ``observed`` counts the articles (seen by this index) that contained the term, and ``prior``
is a guess for a term never observed yet: by default, derived from the wordfreq English frequency
list (a word's share of running text, turned into the chance that a 300-token article contains it).
Counts decay by half every ``half_life_articles`` articles, so the estimates follow changes in the
news; the index re-chooses access predicates from them when it compacts.

The default prior reads wordfreq's bundled English list once (package data, about 0.1 s), the only
data this package loads; pass another ``prior`` (for example one learned from the hub's own
articles, or per language) to :class:`TermStatistics`.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from feedmesh.match.index.growable import Growable
from feedmesh.match.index.vocabulary import KIND_PHRASE, KIND_PREFIX
from feedmesh.match.query import FIELDS

__all__ = ["PriorFunction", "TermStatistics", "english_prior"]

PriorFunction = Callable[[str, int, str], float]
"""``prior(field, kind, text)``: the guessed share of articles containing a new term."""

_TOKENS_PER_ARTICLE = 300.0  # a typical article body (Cobra, Figure 5: median 61, p90 637 words)
_TOKENS_PER_TITLE = 10.0


@lru_cache(maxsize=1)
def _english_frequencies() -> tuple[dict[str, float], list[str], np.ndarray]:
    import wordfreq  # imported lazily: loading the list takes ~0.1 s, needed only for new terms

    frequencies = wordfreq.get_frequency_dict("en")
    ordered = sorted(frequencies)
    cumulative = np.cumsum([frequencies[word] for word in ordered])
    return frequencies, ordered, cumulative


def _share_of_articles(frequency: float, tokens: float) -> float:
    return -math.expm1(-frequency * tokens)


def english_prior(field: str, kind: int, text: str) -> float:
    """The default prior, from wordfreq's English list (words absent from it count as rare)."""
    if field == "site":
        return 1e-3
    if field == "lang":
        return 0.3
    if field in ("author", "category"):
        return 1e-3
    frequencies, ordered, cumulative = _english_frequencies()
    if kind == KIND_PREFIX:  # every listed word that starts with the prefix
        start = bisect_left(ordered, text)
        end = bisect_left(ordered, text + "\U0010ffff")
        if end > start:
            frequency = float(cumulative[end - 1] - (cumulative[start - 1] if start else 0.0))
        else:
            frequency = 0.0
    elif kind == KIND_PHRASE:
        frequency = min(frequencies.get(token, 0.0) for token in text.split(" ")) / 10.0
    else:
        frequency = frequencies.get(text, 0.0)
    tokens = _TOKENS_PER_TITLE if field == "title" else _TOKENS_PER_ARTICLE
    return max(_share_of_articles(frequency, tokens), 1e-9)


class TermStatistics:
    """Per-term article frequency: a prior blended with decayed observations."""

    def __init__(
        self,
        prior: PriorFunction = english_prior,
        prior_weight: float = 200.0,
        half_life_articles: int = 50_000,
    ) -> None:
        if prior_weight <= 0 or half_life_articles < 1:
            raise ValueError("prior_weight must be > 0 and half_life_articles >= 1")
        self.prior_function = prior
        self.prior_weight = prior_weight
        self.half_life_articles = half_life_articles
        self._prior = Growable(np.float64)
        self._observed = Growable(np.float64)
        self.articles = 0.0  # decayed count of observed articles
        self._since_decay = 0
        self.observations = 0  # articles observed since creation (not decayed)

    def __len__(self) -> int:
        return len(self._prior)

    def add_term(self, field_code: int, kind: int, text: str) -> None:
        """Register the next term id (call in id order, as the vocabulary grows)."""
        prior = float(self.prior_function(FIELDS[field_code], kind, text))
        self._prior.append(min(max(prior, 0.0), 1.0))
        self._observed.append(0.0)

    def restore(self, prior: np.ndarray, observed: np.ndarray, articles: float) -> None:
        """Load saved arrays (from a snapshot) in place of the current ones."""
        self._prior = Growable(np.float64, prior)
        self._observed = Growable(np.float64, observed)
        self.articles = float(articles)

    def observe(self, term_ids: np.ndarray) -> None:
        """Count one article that contained exactly the (unique) terms ``term_ids``."""
        observed = self._observed.view()
        observed[term_ids[term_ids < len(observed)]] += 1.0
        self.articles += 1.0
        self.observations += 1
        self._since_decay += 1
        if self._since_decay >= self.half_life_articles:
            observed *= 0.5
            self.articles *= 0.5
            self._since_decay = 0

    def observe_many(self, term_lists: list[np.ndarray]) -> None:
        """:meth:`observe` each of ``term_lists`` in turn (one article's unique terms each):
        the same counts and decays, one numpy step per batch instead of per article."""
        done = 0
        while done < len(term_lists):
            # Up to the next decay: counts added, then halved, exactly as one at a time.
            take = min(len(term_lists) - done, self.half_life_articles - self._since_decay)
            chunk = term_lists[done:done + take]
            observed = self._observed.view()
            terms = np.concatenate(chunk) if len(chunk) > 1 else chunk[0]
            terms, counts = np.unique(terms[terms < len(observed)], return_counts=True)
            observed[terms] += counts
            self.articles += float(take)
            self.observations += take
            self._since_decay += take
            done += take
            if self._since_decay >= self.half_life_articles:
                observed *= 0.5
                self.articles *= 0.5
                self._since_decay = 0

    def estimates(self) -> np.ndarray:
        """Estimated share of articles containing each term (a new array)."""
        prior = self._prior.view()
        observed = self._observed.view()
        return (observed + self.prior_weight * prior) / (self.articles + self.prior_weight)

    def estimate(self, term_ids: list[int]) -> list[float]:
        """:meth:`estimates` for a few terms (cheap: no array over the whole vocabulary)."""
        prior = self._prior.view()
        observed = self._observed.view()
        scale = 1.0 / (self.articles + self.prior_weight)
        return [
            (float(observed[t]) + self.prior_weight * float(prior[t])) * scale for t in term_ids
        ]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(prior, observed) views, for snapshots."""
        return self._prior.view(), self._observed.view()
