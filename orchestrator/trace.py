"""The JSONL event trace: one event per line, written and flushed as it happens.

Every event has `seq`, `ts`, `agent` (a path such as `planner/summarize`) and `type`. Events of
type `message` carry whole messages, so `rebuild_conversations` can restore every conversation
from the file alone. Values of secret-looking environment variables are masked before a line is
written. The event types are documented in docs/trace.md.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from .messages import Message

Event = dict[str, Any]
Listener = Callable[[Event], None]

# Whole words of a variable's name: OPENAI_API_KEY, GH_TOKEN, DB_PASSWORD, but not
# GIT_AUTHOR_NAME or KEYBOARD; SSH_AUTH_SOCK is a socket path, not a secret.
SECRET_NAME = re.compile(
    r"(^|_)(KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|AUTH|CREDENTIALS?)(_|$)", re.IGNORECASE
)
NOT_SECRET = {"SSH_AUTH_SOCK"}
MIN_SECRET_LENGTH = 8
MASK = "[REDACTED]"
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)  # json.dumps builds one per call


def secrets_from_environment(environ: dict[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names say they are secret."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says its value is secret."""
    return name.upper() not in NOT_SECRET and SECRET_NAME.search(name) is not None


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
        given = list(secrets) if secrets is not None else secrets_from_environment()
        # Mask each secret as it appears in a JSON line, escapes included (a quote, a backslash).
        self.secrets = sorted(
            {form for s in given for form in (s, json.dumps(s, ensure_ascii=False)[1:-1])},
            key=len,
            reverse=True,
        )
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
                self._file.write(self._redact(_ENCODER.encode(event)) + "\n")
                self._file.flush()
        for listener in self.listeners:
            listener(event)
        return event

    def message(self, agent: str, message: Message) -> None:
        self.emit("message", agent, message=message.to_dict())

    def _redact(self, line: str) -> str:
        for secret in self.secrets:
            if secret in line:
                line = line.replace(secret, MASK)
        return line

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trace(path: str | Path) -> list[Event]:
    """All events of a trace file; a torn last line (from a crash) is skipped."""
    return list(iter_trace(path))


def iter_trace(path: str | Path) -> Iterator[Event]:
    with Path(path).open(encoding="utf-8") as lines:
        for line in lines:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def rebuild_conversations(source: str | Path | Iterable[Event]) -> dict[str, list[Message]]:
    """Every agent's conversation, rebuilt from the trace alone.

    Keys are agent paths; when one path ran more than once in the trace, later runs are keyed
    `path#2`, `path#3`, and so on.
    """
    events = iter_trace(source) if isinstance(source, str | Path) else source
    conversations: dict[str, list[Message]] = {}
    current: dict[str, str] = {}
    for event in events:
        agent = event["agent"]
        if event["type"] == "run_start":
            key = agent
            runs = 1
            while key in conversations:
                runs += 1
                key = f"{agent}#{runs}"
            current[agent] = key
            conversations[key] = []
        elif event["type"] == "message":
            key = current.setdefault(agent, agent)
            conversations.setdefault(key, []).append(Message.model_validate(event["message"]))
    return conversations
