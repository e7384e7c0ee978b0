"""The events Ray writes to a run's trace: its own kinds, declared to the core's readers.

Each carries `part: "ray"`; a reader where Ray is not loaded keeps them as `PartEvent`s. Every
event a Ray worker relays also gets `worker`, the worker that ran it (relay.py).
"""

from __future__ import annotations

from typing import Literal

from ..events import PartEvent, declare_part_kinds


class TaskRetry(PartEvent):
    """A task's Ray worker died while it ran; it starts again on another worker."""

    type: Literal["task_retry"] = "task_retry"
    part: Literal["ray"] = "ray"
    id: str
    reason: str
    worker: str
    """The new worker."""


declare_part_kinds(TaskRetry)
