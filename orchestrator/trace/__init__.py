"""The run's record: the JSONL trace writer, reading it back, checkpoints and summaries."""

from ..events import Event, Listener, is_event, new_run_id
from .checkpoint import (
    ENDED_TASK,
    AgentRecord,
    Checkpoint,
    ForkRecord,
    TaskRecord,
    load_checkpoint,
)
from .reader import TraceEvents, TraceReader, iter_trace, read_trace, rebuild_conversations
from .writer import Sink, Trace, TraceBusy, TraceExists, add_sink, open_trace, remove_sink

__all__ = [
    "ENDED_TASK",
    "AgentRecord",
    "Checkpoint",
    "Event",
    "ForkRecord",
    "Listener",
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
