"""The run's record: the JSONL trace writer, reading it back, and summaries of a run."""

from .reader import iter_trace, read_trace, rebuild_conversations
from .writer import Event, Listener, Sink, Trace, add_sink, open_trace, remove_sink

__all__ = [
    "Event",
    "Listener",
    "Sink",
    "Trace",
    "add_sink",
    "iter_trace",
    "open_trace",
    "read_trace",
    "rebuild_conversations",
    "remove_sink",
]
