"""The run's record: the JSONL trace writer, reading it back, and summaries of a run."""

from .reader import iter_trace, read_trace, rebuild_conversations
from .writer import Event, Listener, Trace

__all__ = ["Event", "Listener", "Trace", "iter_trace", "read_trace", "rebuild_conversations"]
