"""What a model call is charged: the provider's usage when it is believable, else our count.

Usage comes from outside and is not trusted blindly. Counts that are missing, not numbers or
negative are replaced by the loop's own count of the request and reply (tiktoken); a total
that disagrees with its parts becomes their sum. A total of more than `ABSURD_FACTOR` times
what the call reserved (its whole input and its output cap) cannot be right: the call is
charged its reservation, the most it could have used. When such a total also runs to
`LYING_TOTAL` or more, the provider is clearly lying and the run ends as `error`: a budget fed
such numbers means nothing. Every doubt is recorded in the `model_call` event with the raw
usage as the provider sent it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..messages import Usage

ABSURD_FACTOR = 10
LYING_TOTAL = 1_000_000


@dataclass(frozen=True)
class Charge:
    """The usage a call is charged, and why the provider's own figures were not taken."""

    usage: Usage
    doubt: str | None = None
    absurd: bool = False
    """The provider is clearly lying: the run must end."""


def charge(
    reported: Usage | None, raw: Any, estimate: Callable[[], Usage], reserved: int
) -> Charge:
    """The usage to settle for one call; `estimate()` is the loop's own count of it."""
    if reported is None:
        doubt = None if raw is None else "the provider's usage has no usable numbers"
        return Charge(estimate(), doubt)
    parts = (reported.input_tokens, reported.output_tokens, reported.total_tokens)
    if min(parts) < 0:
        return Charge(estimate(), "the provider reported negative token counts")
    usage, doubt = reported, None
    if reported.total_tokens != reported.input_tokens + reported.output_tokens:
        usage = Usage.of(reported.input_tokens, reported.output_tokens)
        doubt = "the provider's total did not match its input and output counts"
    if usage.total_tokens > ABSURD_FACTOR * max(reserved, 1):
        doubt = (
            f"the provider reported {usage.total_tokens:,} tokens for a call that could use "
            f"at most about {reserved:,}"
        )
        counted = min(estimate().input_tokens, reserved)
        charged = Usage.of(counted, reserved - counted)
        return Charge(charged, doubt, absurd=usage.total_tokens >= LYING_TOTAL)
    return Charge(usage, doubt)
