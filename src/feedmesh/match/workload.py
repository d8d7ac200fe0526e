"""Seeded, deterministic Cobra-style workloads: subscriptions and articles (Cobra, section 4).

Words come from a real English frequency list (wordfreq's), sampled in proportion to frequency.
Articles use every word, like running text; subscriptions exclude the 29 most popular ones ("which
are considered excessively general and would match essentially any article"). Subscription lengths
follow Cobra's web-search statistics (median 3, maximum 8 words):

    1: 20%  2: 25%  3: 25%  4: 15%  5: 8%  6: 4%  7: 2%  8: 1%

Two variants: ``conjunctive`` (Cobra's: words joined by AND only) and ``mixed``, which also uses OR,
NOT, quoted phrases, prefix wildcards, ``title:`` and ``site:``; its articles carry the phrases
(drawn from a fixed list of collocations), sites and languages those queries look for.

Everything is a pure function of the seed. Subscriptions are generated in blocks of 100,000 with
one random stream per block, so ``subscriptions(100_000)`` is a prefix of
``subscriptions(1_000_000)``: benchmarks at several sizes share their data.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final, Literal

import numpy as np

from feedmesh.match.article import Article

__all__ = [
    "ARTICLE_SIZES",
    "COBRA_QUERY_LENGTHS",
    "EXCLUDED_TOP_WORDS",
    "Variant",
    "WordDistribution",
    "Workload",
    "english_words",
]

Variant = Literal["conjunctive", "mixed"]

COBRA_QUERY_LENGTHS: Final = (0.20, 0.25, 0.25, 0.15, 0.08, 0.04, 0.02, 0.01)
"""Share of subscriptions with 1..8 words."""
ARTICLE_SIZES: Final = (61, 637, 2000)
"""Words per article: Figure 5's median and 90th percentile, and Figure 10's longest."""
EXCLUDED_TOP_WORDS: Final = 29
_BLOCK: Final = 100_000
_TITLE_WORDS: Final = 8
_COLLOCATIONS: Final = 2_000
_SITES: Final = 1_000
_PLAIN_WORD = re.compile(r"[a-z]+")


class WordDistribution:
    """Words and their sampling probabilities (most frequent first)."""

    def __init__(self, words: tuple[str, ...], frequencies: np.ndarray) -> None:
        if len(words) != len(frequencies) or len(words) <= EXCLUDED_TOP_WORDS:
            raise ValueError("need as many frequencies as words, and more than 29 words")
        self.words = words
        self._all = np.cumsum(frequencies / frequencies.sum())
        tail = frequencies[EXCLUDED_TOP_WORDS:]
        self._tail = np.cumsum(tail / tail.sum())
        self._array = np.array(words, dtype=object)

    def sample(self, rng: np.random.Generator, count: int, *, exclude_top: bool) -> np.ndarray:
        """Indices of ``count`` words drawn by frequency (optionally never the top 29)."""
        cumulative = self._tail if exclude_top else self._all
        drawn = np.searchsorted(cumulative, rng.random(count) * cumulative[-1], side="right")
        drawn = np.minimum(drawn, len(cumulative) - 1)
        return drawn + EXCLUDED_TOP_WORDS if exclude_top else drawn

    def text(self, indices: np.ndarray) -> list[str]:
        return self._array[indices].tolist()


@lru_cache(maxsize=4)
def english_words(size: int = 50_000) -> WordDistribution:
    """The ``size`` most frequent plain lower-case English words of wordfreq, with frequencies."""
    import wordfreq

    frequencies = wordfreq.get_frequency_dict("en")
    words = [w for w in wordfreq.top_n_list("en", size * 2) if _PLAIN_WORD.fullmatch(w)][:size]
    return WordDistribution(tuple(words), np.array([frequencies[w] for w in words]))


class Workload:
    """A reproducible source of subscriptions and articles for one ``seed``."""

    def __init__(self, seed: int = 0, words: WordDistribution | None = None) -> None:
        self.seed = seed
        self.words = words or english_words()
        rng = np.random.default_rng([seed, 7])
        self.collocations = [
            " ".join(self.words.text(
                self.words.sample(rng, int(rng.integers(2, 4)), exclude_top=True)))
            for _ in range(_COLLOCATIONS)
        ]
        ranks = np.arange(1, _COLLOCATIONS + 1, dtype=np.float64)
        self._collocation_weights = np.cumsum(1 / ranks) / np.sum(1 / ranks)
        site_ranks = np.arange(1, _SITES + 1, dtype=np.float64)
        self._site_weights = np.cumsum(1 / site_ranks) / np.sum(1 / site_ranks)

    # --- subscriptions -------------------------------------------------------------------------

    def subscriptions(self, count: int, variant: Variant = "conjunctive") -> list[str]:
        """``count`` query texts; the first n of a larger count are the n of a smaller one."""
        queries: list[str] = []
        for block in range((count + _BLOCK - 1) // _BLOCK):
            size = min(_BLOCK, count - block * _BLOCK)
            rng = np.random.default_rng([self.seed, 1 if variant == "conjunctive" else 2, block])
            queries.extend(self._block(rng, size, variant))
        return queries

    def _block(self, rng: np.random.Generator, size: int, variant: Variant) -> list[str]:
        lengths = rng.choice(np.arange(1, 9), size=size, p=COBRA_QUERY_LENGTHS)
        words = self.words.text(self.words.sample(rng, int(lengths.sum()), exclude_top=True))
        ends = np.cumsum(lengths).tolist()
        starts = [0, *ends[:-1]]
        if variant == "conjunctive":
            return [" ".join(words[a:b]) for a, b in zip(starts, ends, strict=True)]
        kinds = rng.random(size)
        extra = self.words.text(self.words.sample(rng, 2 * size, exclude_top=True))
        return [
            self._mixed(rng, words[a:b], kind, extra[2 * i], extra[2 * i + 1])
            for i, (a, b, kind) in enumerate(zip(starts, ends, kinds.tolist(), strict=True))
        ]

    def _mixed(self, rng: np.random.Generator, words: list[str], kind: float, a: str,
               b: str) -> str:
        if kind < 0.60:
            return " ".join(words)
        if kind < 0.70:  # one word becomes an alternative
            return " ".join([f"({words[0]} OR {a})", *words[1:]])
        if kind < 0.80:  # exclude a word the query does not require
            excluded = b if b not in words else a
            return " ".join(words) + ("" if excluded in words else f" -{excluded}")
        if kind < 0.88:
            phrase = self.collocations[self._pick(rng, self._collocation_weights)]
            return " ".join([f'"{phrase}"', *words[:2]])
        if kind < 0.93:
            long_word = next((w for w in [*words, a, b] if len(w) >= 6), None)
            if long_word is None:
                return " ".join(words)
            return " ".join([f"{long_word[:5]}*", *words[1:3]])
        if kind < 0.97:
            return " ".join([f"title:{words[0]}", *words[1:]])
        return f"site:news{self._pick(rng, self._site_weights)}.example {words[0]}"

    @staticmethod
    def _pick(rng: np.random.Generator, cumulative: np.ndarray) -> int:
        index = np.searchsorted(cumulative, rng.random(), side="right")
        return int(min(index, len(cumulative) - 1))

    # --- articles --------------------------------------------------------------------------------

    def article_texts(self, count: int, words_per_article: int, stream: int = 0) -> list[str]:
        """``count`` plain texts of ``words_per_article`` words (title sentence first)."""
        articles = self.articles(count, words_per_article, "conjunctive", stream)
        return [f"{article.title}. {article.text}" for article in articles]

    def articles(
        self,
        count: int,
        words_per_article: int,
        variant: Variant = "conjunctive",
        stream: int = 0,
    ) -> list[Article]:
        """``count`` articles of ``words_per_article`` words in all (title included)."""
        rng = np.random.default_rng([self.seed, 3, words_per_article, stream, variant == "mixed"])
        return [self._article(rng, words_per_article, variant) for _ in range(count)]

    def _article(self, rng: np.random.Generator, size: int, variant: Variant) -> Article:
        words = self.words.text(self.words.sample(rng, size, exclude_top=False))
        if variant == "mixed":
            for _ in range(int(rng.poisson(size / 40))):  # insert collocations in place of words
                phrase = self.collocations[self._pick(rng, self._collocation_weights)].split(" ")
                at = int(rng.integers(0, max(1, size - len(phrase))))
                words[at : at + len(phrase)] = phrase
            words = words[:size]
        title_size = min(_TITLE_WORDS, size // 4)
        title = " ".join(words[:title_size]).title()
        body = words[title_size:]
        sentence_ends = set(np.cumsum(rng.integers(8, 20, size=len(body) // 8 + 1)).tolist())
        text = " ".join(
            f"{word}." if i + 1 in sentence_ends or i + 1 == len(body) else word
            for i, word in enumerate(body)
        )
        if variant == "conjunctive":
            return Article(title=title, text=text, site="news.example", language="en")
        site = f"www.news{self._pick(rng, self._site_weights)}.example"
        language = "en" if rng.random() < 0.8 else str(rng.choice(["en-gb", "fr", "de"]))
        return Article(title=title, text=text, site=site, language=language)
