"""Counted nouns for what the command line and the reports say: `1 folder`, `2 folders`.

One helper for every message with a count (`orchestrator.cli`, `trace show`, the HTML report),
so none says "1 folders" or "problem(s)". It lives here, low in the layers, so all can use it.
"""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural unless `count` is 1 (`many` when the plural
    is not the noun with an s: `plural(2, "match", "matches")`). Counts get thousands
    separators."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
