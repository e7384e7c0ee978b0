"""Asking a person on the terminal before a call the permissions mark `ask`.

`orchestrator run` on a terminal (standard input is one) shows each such call, with its agent,
tool, arguments and the permission that asks, and waits for y or n; anything but y (or yes)
denies it, as does the end of input. The live view pauses while it asks. Prompts come one at
a time, even when agents run side by side. Not on a terminal, there is no one to ask: such
calls are denied, and the observation says so (agent/turn_calls.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TextIO

from ..agent import ApprovalRequest
from ..agent.tools import run_in_thread

MAX_SHOWN = 2_000
YES = frozenset({"y", "yes"})


class TerminalApprover:
    """An approval callback that asks on the terminal (prompt on stderr, answer on stdin)."""

    def __init__(
        self,
        stdin: TextIO | None = None,
        stream: TextIO | None = None,
        pause: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.stdin = stdin or sys.stdin
        self.stream = stream or sys.stderr
        self.pause = pause or nullcontext
        self._lock = asyncio.Lock()

    async def __call__(self, request: ApprovalRequest) -> bool:
        async with self._lock:
            return await run_in_thread(self._ask, request)

    def _ask(self, request: ApprovalRequest) -> bool:
        with self.pause():
            print(render_request(request), file=self.stream, flush=True)
            print("Allow this call? [y/N] ", end="", file=self.stream, flush=True)
            answer = self.stdin.readline()
            allowed = answer.strip().lower() in YES
            verdict = "allowed" if allowed else "denied"
            print(
                f"-> {verdict}" if answer.endswith("\n") else f"\n-> {verdict}",
                file=self.stream,
                flush=True,
            )
        return allowed


def render_request(request: ApprovalRequest) -> str:
    """The call as the prompt shows it."""
    arguments = json.dumps(request.arguments, indent=2, ensure_ascii=False)
    if len(arguments) > MAX_SHOWN:
        arguments = arguments[:MAX_SHOWN] + f"\n... ({len(arguments) - MAX_SHOWN} more characters)"
    return (
        f"\nApproval needed: agent {request.agent} wants to call {request.tool} "
        f"({request.rule})\narguments: {arguments}"
    )
