"""The events A2A writes to a run's trace: its own kinds, declared to the core's readers.

Each carries `part: "a2a"`. A reader where A2A is not loaded (`trace show` of a run that
called a remote agent, in an install without the `[a2a]` extra) still carries them through as
`PartEvent`s: a remote agent's reported tokens (`usage`) count into its total, and its
status (`activity`, `note`) shows in a live view, without the core knowing these kinds.
"""

from __future__ import annotations

from typing import Literal

from ..events import PartEvent, declare_part_kinds


class A2AEvent(PartEvent):
    part: Literal["a2a"] = "a2a"


class A2ASend(A2AEvent):
    """A task is sent to a remote agent, or an answer to what its task asked."""

    type: Literal["a2a_send"] = "a2a_send"
    url: str
    task_id: str | None = None
    """For an answer: the remote task it goes to."""
    answer: str | None = None
    """For an answer: the id of the request it answers (the remote's input-required)."""


class A2AStatus(A2AEvent):
    """A remote task's status changed: `activity` says its state (`remote task working`),
    `note` its last message's text."""

    type: Literal["a2a_status"] = "a2a_status"
    state: str
    coalesced: int | None = None
    """How many updates came since the last one written (they are written at most once a
    second after the first few)."""


class A2ATask(A2AEvent):
    """A remote task's ids became known (or, served, a task arrived)."""

    type: Literal["a2a_task"] = "a2a_task"
    task_id: str
    context_id: str | None = None
    url: str | None = None
    resumed: bool | None = None


class A2ACancel(A2AEvent):
    """A remote task was asked to cancel."""

    type: Literal["a2a_cancel"] = "a2a_cancel"
    task_id: str | None = None
    ok: bool
    error: str | None = None


class A2AEnd(A2AEvent):
    """A remote task ended (`usage`: what the remote reported, when it did; `activity` is
    empty: the remote agent stopped)."""

    type: Literal["a2a_end"] = "a2a_end"
    status: str
    usage_reported: bool
    status_updates: int | None = None
    """How many status updates the task sent."""
    status_coalesced: int | None = None
    """How many of them were counted, not written."""
    truncated_chars: int | None = None
    """Characters the remote sent past what a task's output may hold: counted, not kept."""


declare_part_kinds(A2ASend, A2AStatus, A2ATask, A2ACancel, A2AEnd)
