"""Asking a person on the terminal before a call the permissions mark `ask`.

`orchestrator run` on a terminal (standard input is one) shows each such call, with its agent,
tool, arguments and the permission that asks, and waits for y or n; anything but y (or yes)
denies it, as does the end of input. An agent's question (`ask_user`) is asked the same way,
its answer checked against its form; an empty answer leaves it waiting (the run ends
`input_required`, docs/waiting.md). The live view pauses while it asks. Prompts come one at
a time, even when agents run side by side. Not on a terminal, there is no one to ask: such
calls wait for an answer given on resume, or as the run's `on_input` says.
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
from ..events import Answer, InputRequest

MAX_SHOWN = 2_000
YES = frozenset({"y", "yes"})


class TerminalApprover:
    """An approval callback that asks on the terminal (prompt on stderr, answer on stdin);
    `answer` asks an agent's question there the same way (agent/waiting.py)."""

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

    async def answer(self, request: InputRequest) -> Answer | None:
        """A person's answer to an agent's question, checked against its form (asked again
        while it does not fit); None, to leave it waiting, on an empty line or the end of
        input."""
        async with self._lock:
            return await run_in_thread(self._question, request)

    def _question(self, request: InputRequest) -> Answer | None:
        from ..agent.waiting import AnswerRefused, check_answer, request_lines

        with self.pause():
            print(f"\nQuestion: {request_lines([request])[0]}", file=self.stream, flush=True)
            while True:
                print("Answer (empty: later): ", end="", file=self.stream, flush=True)
                line = self.stdin.readline()
                if not line.strip():
                    print("-> left waiting", file=self.stream, flush=True)
                    return None
                try:
                    given = check_answer(request, line.rstrip("\n"))
                except AnswerRefused as refused:
                    print(f"-> {refused}", file=self.stream, flush=True)
                    continue
                print("-> answered", file=self.stream, flush=True)
                return given

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
