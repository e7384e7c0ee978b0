"""The JSONL event trace: one event per line, written and flushed as it happens.

Every event has `seq`, `ts`, `agent` (a path such as `planner/summarize`) and `type`. Events of
type `message` carry whole messages, so `rebuild_conversations` can restore every conversation
from the file alone. Values of secret-looking environment variables are masked before a line is
written. The event types are documented in docs/trace.md.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from ..messages import Message
from ..security.secrets import SecretMask

Event = dict[str, Any]
Listener = Callable[[Event], None]
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)  # json.dumps builds one per call


class Trace:
    """Writes events to a JSONL file (if a path is given) and hands them to listeners.

    One Trace is shared by every agent of a run; `seq` orders events across all of them.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        listeners: Iterable[Listener] = (),
        secrets: Iterable[str] | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.listeners: list[Listener] = list(listeners)
        self.mask = SecretMask(secrets)
        self._seq = 0
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")

    def emit(self, type: str, agent: str, **fields: Any) -> Event:
        """Record one event; returns it as written."""
        with self._lock:
            self._seq += 1
            event: Event = {"seq": self._seq, "ts": time.time(), "agent": agent, "type": type}
            event.update(fields)
            if self._file is not None:
                self._file.write(self.mask(_ENCODER.encode(event)) + "\n")
                self._file.flush()
        for listener in self.listeners:
            listener(event)
        return event

    def message(self, agent: str, message: Message) -> None:
        self.emit("message", agent, message=message.to_dict())

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
