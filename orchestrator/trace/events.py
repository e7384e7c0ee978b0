"""What a trace is made of: events, one JSON object per line, and the run they belong to.

Every event has `seq`, `ts`, `run` (the run's id), `attempt` (1, or more once the run was
resumed), `agent` and `type`. A line that is not such an object (torn by a crash, garbage,
JSON of another kind) is not an event, and readers skip it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any, TypeGuard

Event = dict[str, Any]
Listener = Callable[[Event], None]


def is_event(value: object) -> TypeGuard[Event]:
    """True for a dict with an integer `seq` and text `type` and `agent`: an event."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("seq"), int)
        and not isinstance(value.get("seq"), bool)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("agent"), str)
    )


def new_run_id() -> str:
    """A run id, unique across runs started in the same second: `20260514-153012-4f9a2c`."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
