"""An MCP server's questions during a call of ours (elicitation), put to a person.

A server asks while it handles a `tools/call`, in the way of its protocol version:

- 2026-07-28 and later (SEP-2322, multi round-trip requests): the call's result is
  `input_required`, holding the questions (`inputRequests`, by key) and the server's opaque
  `requestState`; the call is sent again with the answers (`inputResponses`) and that state
  (connection.py). The server keeps nothing between the two: a call whose question must wait
  for a person simply stops there.
- Handshake-era servers send `elicitation/create` in the middle of the call and wait for the
  reply. A question that must wait for a person is answered `cancel` (no choice was made), so
  the server's call ends; its result is not used, and what it asks after that `cancel` is
  cancelled unasked. Such a request does not say which call it belongs to: it goes to the
  one call running on that server; with several at once, which asked cannot be told, and it
  is cancelled (each of them says so).

Either way a question becomes an `InputRequest` (agent/waiting.py) of kind `elicitation`:
form `schema` with the server's `requestedSchema` (a URL-mode question is a yes/no one, naming
the URL), its id made from the calling agent, the call and the question's round (its place
among the call's questions), `expires_at` the server's `answerWithin` from now. It is
answered as every request is: the answer given on resume, else the run's `on_input`. With
`wait` the call raises `WaitingForInput` once the server has let go; the run ends
`input_required`, and on resume the call is made again: the server asks again, round by
round, and gets the recorded answers (accepted with their content, declined or cancelled as
given). An answer that came after the request expired is not sent: the server is told the
question was cancelled, and the call's result tells the agent why.

What a server asks is untrusted: its schema must compile within the bounds of any schema
read from outside (agent/bounded_schema.py), checked in a worker thread, or the question is
declined without asking anyone; its text is cut and shown quoted; the values the server's
configuration names as secret are masked in both. A call asks at most `QUESTIONS_PER_CALL`
questions.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..agent import InputRefused, ToolContext, WaitingForInput
from ..agent.waiting import ANSWERED_LATE, DENIED_BY_POLICY, answer_for, new_request
from ..errors import ConfigError
from ..events import Answer, InputForm, InputRequest
from .schema import masked

QUESTIONS_PER_CALL = 20
"""Questions one call may ask; the server's later ones are cancelled without asking anyone."""
CANCEL: dict[str, Any] = {"action": "cancel"}
DECLINE: dict[str, Any] = {"action": "decline"}
_SCALARS = (str, int, float, bool, type(None))


@dataclass
class CallQuestions:
    """The questions one server asks during one call of ours, and what became of them.

    `reply` answers one (an `elicitation/create`'s params, as on the wire) with the reply the
    protocol takes (`{"action": ..., "content": ...}`); `settle` raises, once the server has
    let go of the call, what the call must wait for; `notes` are what the agent must be told
    beside the server's result."""

    ctx: ToolContext
    server: str
    answer_within: float
    mask: Callable[[str], str] = str
    asked: int = 0
    waiting: list[InputRequest] = field(default_factory=list)
    refused: InputRefused | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"MCP server {self.server!r}"

    async def reply(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to one question of the server's (of those a 2026 server asks at once,
        each is asked: a person answers them together)."""
        if self.refused is not None:
            return CANCEL  # the run ends: nothing more is asked of anyone
        if self.asked >= QUESTIONS_PER_CALL:
            self.notes.append(
                f"{self.source} asked more than {QUESTIONS_PER_CALL} questions in this call; "
                "the later ones were cancelled without asking anyone."
            )
            return CANCEL
        round, self.asked = self.asked, self.asked + 1
        message = self.mask(str(params.get("message") or ""))
        if params.get("mode") == "url":
            url = self.mask(str(params.get("url") or ""))
            question = f"{message} (open {url}; answer yes once done there, no to decline)"
            request = self._request(question, round, form="yes_no")
        else:
            schema = params.get("requestedSchema", params.get("requested_schema"))
            problem = await asyncio.to_thread(form_problem, schema)
            if problem is not None:
                self.notes.append(
                    f"{self.source} asked {json.dumps(message[:200])}, with a form that cannot "
                    f"be used ({problem}); it was declined without asking anyone."
                )
                return DECLINE
            request = self._request(message, round, form="schema", schema=masked(schema, self.mask))
        try:
            answer = await answer_for(self.ctx, request)
        except WaitingForInput as exc:
            self.waiting.extend(exc.requests)
            return CANCEL
        except InputRefused as exc:
            self.refused = exc
            return CANCEL
        return self._given(request, answer)

    async def reply_in_call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to a question a handshake-era server asks in the middle of the call.
        Once one waits, the server's later questions are cancelled unasked: they follow from
        its `cancel`, and are not what the server asks again on resume."""
        return CANCEL if self.waiting else await self.reply(params)

    def _request(
        self, question: str, round: int, *, form: InputForm, schema: dict[str, Any] | None = None
    ) -> InputRequest:
        return new_request(
            self.ctx,
            "elicitation",
            question,
            source=self.source,
            form=form,
            input_schema=schema,
            expires_at=time.time() + self.answer_within,
            round=round,
        )

    def _given(self, request: InputRequest, answer: Answer) -> dict[str, Any]:
        """The reply that carries `answer` to the server, as the protocol has it."""
        asked = f"{self.source}'s question {request.id} ({json.dumps(request.question[:200])})"
        if answer.by == ANSWERED_LATE:
            self.notes.append(
                f"The answer to {asked} came after the question had expired, so it was not "
                "sent: the server was told the question was cancelled. Ask the user to answer "
                "again if the call is made again."
            )
            return CANCEL
        if answer.by == DENIED_BY_POLICY:
            self.notes.append(
                f"{asked} was declined by the run's policy (on_input: deny): no one could be asked."
            )
            return DECLINE
        if answer.action != "accept":
            return {"action": answer.action}
        if request.form == "yes_no":  # a URL-mode question: consent, nothing else
            return {"action": "accept"} if answer.value is True else DECLINE
        if not _carried(answer.value):
            self.notes.append(
                f"The answer to {asked} is not one the protocol can carry (an object of "
                "strings, numbers, booleans and lists of strings); the server was told the "
                "question was cancelled."
            )
            return CANCEL
        return {"action": "accept", "content": answer.value}

    def unplaced(self, params: Mapping[str, Any], running: int) -> None:
        """A question this call may have asked, while `running` calls ran on the server."""
        message = self.mask(str(params.get("message") or ""))[:200]
        self.notes.append(
            f"{self.source} asked {json.dumps(message)} while {running} calls to it ran at "
            "once; its protocol version does not say which call asked, so the question was "
            "cancelled without asking anyone."
        )

    def settle(self) -> None:
        """Raise what the call's questions came to: `WaitingForInput` for those a person must
        answer first, `InputRefused` where the run's `on_input` is `fail`."""
        if self.refused is not None:
            raise self.refused
        if self.waiting:
            raise WaitingForInput(self.waiting)

    def told(self, text: str) -> str:
        """The call's observation with what the agent must know of its questions."""
        if not self.notes:
            return text
        return "\n".join([*(f"[{note}]" for note in self.notes), text])


def form_problem(schema: object) -> str | None:
    """Why a server's `requestedSchema` cannot be a form a person fills in, or None: it must
    be an object schema within the bounds of an output schema (its size, depth, `$ref`s and
    patterns; agent/bounded_schema.py)."""
    from ..agent.bounded_schema import compile_schema  # jsonschema: loaded only for a form

    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "its requestedSchema is not an object schema"
    try:
        compile_schema(schema)
    except ConfigError as exc:
        return str(exc).replace("the output schema", "its requestedSchema")
    except Exception as exc:  # a server's schema is untrusted: whatever it breaks, it is refused
        return f"its requestedSchema could not be read ({type(exc).__name__})"
    return None


def _carried(value: object) -> bool:
    """Whether `value` is what an accepted elicitation's `content` may hold."""
    if not isinstance(value, dict):
        return False
    return all(
        isinstance(v, _SCALARS) or (isinstance(v, list) and all(isinstance(i, str) for i in v))
        for v in value.values()
    )
