"""English text for the farm's articles, with words drawn by their real frequency (``wordfreq``).

Drawing words one by one costs ~0.3 us each; a 100k-feed crawl would spend seconds on it. Instead,
on first use, a fixed-seed *stream* of ~400k words is drawn once from wordfreq's English list by
frequency (Zipf, as real text), cut into sentences, and kept as one string with word offsets. An
article's text is then one slice of that string at a counter-based offset: realistic word
frequencies, deterministic, and a slice costs nanoseconds.
"""

from __future__ import annotations

import re
import threading
from array import array

import numpy as np

__all__ = ["FIRST_NAMES", "LAST_NAMES", "Vocabulary", "vocabulary"]

FIRST_NAMES = ("Ada", "Alan", "Amara", "Ana", "Bjorn", "Carmen", "Chen", "Dana", "Dmitri", "Elena",
               "Femi", "Grace", "Hiro", "Ines", "Jamal", "Jorge", "Kai", "Lena", "Maya", "Noor",
               "Olu", "Priya", "Quinn", "Rosa", "Sam", "Tariq", "Uma", "Vera", "Wen", "Yusuf")
LAST_NAMES = ("Abebe", "Berg", "Costa", "Diaz", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito",
              "Jensen", "Kowalski", "Lopez", "Moreau", "Nakamura", "Okafor", "Patel", "Quist",
              "Rossi", "Silva", "Tanaka", "Umar", "Varga", "Weber", "Xu", "Yilmaz", "Zhang")

_WORD = re.compile(r"^[^\W\d_]+(?:'[^\W\d_]+)?$")
# The farm's text shows up in demos and screenshots: leave out the profanity and slurs that a
# frequency list of web English contains (statistics are unaffected: a few dozen words).
_UNPRINTABLE = frozenset((
    "fuck", "fucking", "fucked", "fucker", "fucks", "motherfucker", "shit", "shitty", "bullshit",
    "bitch", "bitches", "cunt", "asshole", "ass", "dick", "dicks", "pussy", "cock", "cocks",
    "whore", "whores", "slut", "sluts", "bastard", "nigga", "niggas", "nigger", "niggers", "fag",
    "faggot", "retard", "retarded", "porn", "porno", "tits", "boobs", "cum", "dildo", "rape",
    "raped", "wtf", "damn", "goddamn", "piss", "pissed", "crap", "twat", "wank", "wanker",
))
_STREAM_WORDS = 400_000
_VOCABULARY_SIZE = 40_000
_STREAM_SEED = 20061001  # Cobra's crawl began on 1 October 2006


class Vocabulary:
    """The word stream. ``words(offset, n)`` returns ``n`` consecutive words as one string."""

    def __init__(self) -> None:
        import wordfreq

        buckets = wordfreq.get_frequency_list("en")
        words: list[str] = []
        freqs: list[float] = []
        for centibels, bucket in enumerate(buckets):
            for word in bucket:
                if _WORD.match(word) and word not in _UNPRINTABLE:
                    words.append("I" if word == "i" else word)
                    freqs.append(10.0 ** (-centibels / 100.0))
            if len(words) >= _VOCABULARY_SIZE:
                break
        self.vocabulary: tuple[str, ...] = tuple(words)
        rng = np.random.default_rng(_STREAM_SEED)
        cdf = np.cumsum(np.asarray(freqs))
        picks = np.searchsorted(cdf, rng.random(_STREAM_WORDS) * cdf[-1], side="right")
        sentence_lengths = rng.integers(6, 26, size=_STREAM_WORDS // 6)
        tokens: list[str] = []
        position = 0
        for length in sentence_lengths:
            chunk = [words[i] for i in picks[position:position + length]]
            if not chunk:
                break
            chunk[0] = chunk[0][:1].upper() + chunk[0][1:]
            chunk[-1] += "."
            tokens.extend(chunk)
            position += length
        offsets = array("l", [0])
        total = 0
        for token in tokens:
            total += len(token) + 1
            offsets.append(total)
        self._text = " ".join(tokens) + " "
        self._offsets = offsets
        self.size = len(tokens)

    def words(self, offset: int, count: int) -> str:
        """``count`` consecutive words starting at word ``offset`` (taken mod the stream size)."""
        count = max(1, min(count, self.size - 1))
        start = offset % (self.size - count)
        return self._text[self._offsets[start]:self._offsets[start + count] - 1]

    def sentence(self, offset: int, count: int) -> str:
        """Like :meth:`words`, capitalized and ending with a period."""
        text = self.words(offset, count)
        text = text[:1].upper() + text[1:]
        return text if text.endswith(".") else text + "."

    def title(self, offset: int, count: int) -> str:
        """A headline: words without sentence punctuation, first letter capitalized."""
        text = self.words(offset, count).replace(".", "")
        return text[:1].upper() + text[1:]


_lock = threading.Lock()
_instance: Vocabulary | None = None


def vocabulary() -> Vocabulary:
    """The process-wide stream, built on first use (~0.3 s: wordfreq's list and one draw)."""
    global _instance
    if _instance is None:
        with _lock:
            if _instance is None:
                _instance = Vocabulary()
    return _instance
