"""Ranking skills for `search_skills`: a small weighted keyword search, no dependencies.

Each skill is indexed by the words of its name (weight 3), its `metadata.keywords` (2) and its
description with `when_to_use` (1). A query word scores the best weight it finds in a skill,
times its inverse document frequency, so rare words count more than words every description
has. Words are lowercased and lightly stemmed ("files" finds "file", "parsing" finds "parse");
a query word that starts a longer indexed word ("spread" and "spreadsheet") scores half.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from collections.abc import Sequence

from .skill import SkillInfo

NAME_WEIGHT = 3.0
KEYWORD_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0
EXACT_NAME_BONUS = 10.0
MIN_PREFIX = 4
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORD_TEXT = """a an and are as at be by can for from how i in is it its me my of on or
that the this to use used using when with you your any all do does what which who will"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    """Lowercase, stemmed, stopword-free words of a text."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def _stem(word: str) -> str:
    """A light English stemmer: plurals and common verb endings, nothing clever."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    for suffix, shortest in (("ing", 6), ("ed", 5)):
        if word.endswith(suffix) and len(word) >= shortest:
            return word[: -len(suffix)]
    return word


class SearchIndex:
    """An inverted index over a fixed list of skills."""

    def __init__(self, skills: Sequence[SkillInfo]) -> None:
        self.skills = list(skills)
        self.postings: dict[str, dict[int, float]] = defaultdict(dict)
        for position, info in enumerate(self.skills):
            fields = (
                (info.name.replace("-", " "), NAME_WEIGHT),
                (" ".join(info.keywords), KEYWORD_WEIGHT),
                (info.about, DESCRIPTION_WEIGHT),
            )
            for text, weight in fields:
                for word in words(text):
                    postings = self.postings[word]
                    postings[position] = max(postings.get(position, 0.0), weight)
        self.vocabulary = sorted(self.postings)

    def rank(self, query: str, limit: int = 5) -> list[tuple[SkillInfo, float]]:
        """The best `limit` skills for `query`, best first; skills matching nothing left out."""
        scores: dict[int, float] = defaultdict(float)
        for word in dict.fromkeys(words(query)):
            for position, weight in self._matches(word).items():
                scores[position] += weight * self._idf(word)
        wanted = query.strip().lower()
        for position, info in enumerate(self.skills):
            if info.name == wanted:
                scores[position] += EXACT_NAME_BONUS
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return [(self.skills[p], round(s, 3)) for p, s in ranked[: max(0, limit)] if s > 0]

    def _matches(self, word: str) -> dict[int, float]:
        found = dict(self.postings.get(word, {}))
        if len(word) >= MIN_PREFIX:
            for other in self._with_prefix(word):
                for position, weight in self.postings[other].items():
                    found[position] = max(found.get(position, 0.0), weight / 2)
        return found

    def _with_prefix(self, word: str) -> list[str]:
        start = bisect.bisect_left(self.vocabulary, word)
        found = []
        for other in self.vocabulary[start:]:
            if not other.startswith(word):
                break
            if other != word:
                found.append(other)
        return found

    def _idf(self, word: str) -> float:
        matched = len(self.postings.get(word, {})) or 1
        return math.log(1 + len(self.skills) / matched)
