"""The run's record: the JSONL trace writer, reading it back, checkpoints and summaries.

Reading a trace back (the reader, the checkpoint a resumed run folds it into) is imported on
first use (PEP 562): a run that writes its trace never loads it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..events import Event, Listener, is_event, new_run_id
from .writer import (
    NullTrace,
    Sink,
    Trace,
    TraceBusy,
    TraceExists,
    add_sink,
    open_trace,
    remove_sink,
)

if TYPE_CHECKING:
    from .checkpoint import (
        ENDED_TASK,
        AgentHistory,
        AgentRecord,
        Checkpoint,
        ForkRecord,
        TaskRecord,
        load_checkpoint,
    )
    from .reader import TraceEvents, TraceReader, iter_trace, read_trace, rebuild_conversations

_LAZY = {
    **dict.fromkeys(
        (
            "ENDED_TASK",
            "AgentHistory",
            "AgentRecord",
            "Checkpoint",
            "ForkRecord",
            "TaskRecord",
            "load_checkpoint",
        ),
        "checkpoint",
    ),
    **dict.fromkeys(
        ("TraceEvents", "TraceReader", "iter_trace", "read_trace", "rebuild_conversations"),
        "reader",
    ),
}

__all__ = [
    "ENDED_TASK",
    "AgentHistory",
    "AgentRecord",
    "Checkpoint",
    "Event",
    "ForkRecord",
    "Listener",
    "NullTrace",
    "Sink",
    "TaskRecord",
    "Trace",
    "TraceBusy",
    "TraceEvents",
    "TraceExists",
    "TraceReader",
    "add_sink",
    "is_event",
    "iter_trace",
    "load_checkpoint",
    "new_run_id",
    "open_trace",
    "read_trace",
    "rebuild_conversations",
    "remove_sink",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
