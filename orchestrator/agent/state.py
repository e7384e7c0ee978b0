"""What one run of an agent keeps while it goes, and what a resumed run must still finish."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..messages import Message, ToolCall, Transcript, Usage
from .batch import ToolBatch
from .budget import TokenBudget
from .repeats import RepeatDetector
from .results import RunResult
from .tools import ToolContext


@dataclass
class CutTurn:
    """The last turn of a resumed run, as the earlier attempt left it.

    `calls` are the turn's calls from the first one without a result on; `known` holds, for
    each, the result to give it (recorded, or `aborted`/`skipped`), or None where the call is
    run again (a resumable tool such as `fork`). `final` is an answer the earlier attempt got
    but could not end the run with.
    """

    calls: list[ToolCall] = field(default_factory=list)
    known: list[Message | None] = field(default_factory=list)
    final: Message | None = None


@dataclass
class RunState:
    """Everything one run of an agent keeps while it goes."""

    transcript: Transcript
    context: ToolContext
    budget: TokenBudget
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None  # US dollars, when the model has a price
    repeats: RepeatDetector = field(default_factory=RepeatDetector)
    batch: ToolBatch | None = None
    result: RunResult | None = None
    on_event: Callable[..., None] | None = None  # model adapters' events, into the trace
    resume: CutTurn | None = None  # a resumed run's unfinished last turn
