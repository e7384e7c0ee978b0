"""A run that waits for a person: one primitive for every source that needs an answer.

A call the permissions mark `ask` with no live approver, the agent's own question
(`ask_user`), a remote agent's input-required and an MCP server's elicitation all end the same
way: the call raises `WaitingForInput` with an `InputRequest` (who asks, what, the form an
answer takes). The turn's other calls go on; the batch gives the waiting call an
`input_required` result and records the request (`input_request`); once nothing else can go
on, the run ends `input_required` with its open requests in its result
(`RunResult.waiting`), every call paired, and the process may exit.

Answers come back through the run's trace: `resume --answer ID=VALUE` (or `answers=` in
Python) checks each against its request's form (`check_answer`) and records it first in the
next attempt (`input_answer`). The waiting call is then called again (agent/restart.py), and
finds its answer (`Trace.answer`): a question returns it as the call's result, an approval
runs the call or refuses it, a remote agent gets it on its own task.

A request's id is made from the asking agent's path and the call's id, so the same call asks
under the same id in every attempt and an answer file written for one run answers nothing
in another. `on_input` (the run's policy where no one is live) may deny instead (`deny`: the
call is refused, the model reads why) or end the run `error` (`fail`).

A request may expire (`expires_at`, the asker's own: an MCP server's question). An answer
given after that comes too late: it is recorded as given (`input_answer` with `late`), and
the asker gets a `cancel` marked `ANSWERED_LATE` in its place, so it can say so.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import JsonValue

from ..errors import ConfigError
from ..events import (
    Answer,
    AnswerAction,
    InputAnswered,
    InputForm,
    InputKind,
    InputRequest,
    InputRequested,
)
from .tools import InputRefused, Tool, ToolContext, WaitingForInput, asking_a_person

if TYPE_CHECKING:
    from ..trace import Checkpoint

MAX_QUESTION_CHARS = 4_000
"""A question longer than this (a model's, a remote's) is cut before anyone sees it."""
MAX_ANSWER_CHARS = 64_000
MAX_CHOICES = 50

DENIED_BY_POLICY = "policy: deny"
"""Who answered a request the run's `on_input: deny` declined."""
ANSWERED_LATE = "late: the request had expired"
"""Who answered, for the asker, a request whose answer came after it expired: it gets a
`cancel` in place of the person's answer (which the trace keeps)."""
YES = frozenset({"y", "yes", "approve", "approved", "allow", "ok", "true"})
NO = frozenset({"n", "no", "deny", "denied", "refuse", "false"})


class AnswerRefused(ConfigError):
    """An answer that does not fit its request (not one of its choices, not valid against
    its schema), or that names no open request."""


def request_id(agent: str, call_id: str, round: int = 0) -> str:
    """The id of what the call `call_id` of `agent` asks (its `round`-th question)."""
    digest = hashlib.sha256(f"{agent}\0{call_id}\0{round}".encode()).hexdigest()
    return digest[:8]


def new_request(
    ctx: ToolContext,
    kind: InputKind,
    question: str,
    *,
    source: str,
    form: InputForm = "text",
    choices: Sequence[str] | None = None,
    input_schema: dict[str, JsonValue] | None = None,
    tool: str | None = None,
    state: JsonValue = None,
    expires_at: float | None = None,
    round: int = 0,
) -> InputRequest:
    """What the call `ctx` runs asks a person, bounded (a long question or list is cut)."""
    call_id = ctx.call_id or ""
    if len(question) > MAX_QUESTION_CHARS:
        question = question[:MAX_QUESTION_CHARS] + " [... cut]"
    return InputRequest(
        id=request_id(ctx.agent, call_id, round),
        agent=ctx.agent,
        call_id=call_id,
        kind=kind,
        question=question,
        form=form,
        choices=[c[:200] for c in choices[:MAX_CHOICES]] if choices else None,
        input_schema=input_schema,
        source=source,
        tool=tool,
        state=state,
        expires_at=expires_at,
    )


async def answer_for(ctx: ToolContext, request: InputRequest) -> Answer:
    """The answer to `request`: the one given on resume, else a live person's
    (`ToolContext.answer`, a terminal), else the run's policy decides: `wait` raises
    WaitingForInput, `deny` answers `decline` (by the policy), `fail` raises InputRefused.
    An answer that came after the request expired is a `cancel` by `ANSWERED_LATE`."""
    given = ctx.trace.answer(request.id)
    if given is not None:
        if ctx.trace.answered_late(request.id):
            return Answer(id=request.id, action="cancel", by=ANSWERED_LATE)
        return given
    if ctx.answer is not None:  # a person is there (a terminal): asked now
        async with asking_a_person():
            live = await ctx.answer(request)
        if live is not None:
            ctx.trace.emit(InputRequested, agent=request.agent, request=request)
            ctx.trace.emit(InputAnswered, agent=request.agent, answer=live)
            return live
    if ctx.on_input == "deny":  # on the record: what was asked, and that no one answered
        denied = Answer(id=request.id, action="decline", by=DENIED_BY_POLICY)
        ctx.trace.emit(InputRequested, agent=request.agent, request=request)
        ctx.trace.emit(InputAnswered, agent=request.agent, answer=denied)
        return denied
    if ctx.on_input == "fail":
        raise InputRefused(
            f"{request.source} asks a person ({request.kind}: {request.question!r}), and this "
            "run's on_input is 'fail'"
        )
    raise WaitingForInput([request])


def check_answer(
    request: InputRequest, value: JsonValue, *, action: AnswerAction = "accept"
) -> Answer:
    """`value` as an answer to `request`, in the form it asks for; text is read as the form
    says (`yes`/`no`, a choice or its number, JSON for a schema). Raises AnswerRefused."""
    if action != "accept":
        return Answer(id=request.id, action=action)
    if isinstance(value, str) and len(value) > MAX_ANSWER_CHARS:
        raise AnswerRefused(f"the answer to {request.id} is over {MAX_ANSWER_CHARS} characters")
    match request.form:
        case "yes_no":
            return Answer(id=request.id, value=_yes_no(request, value))
        case "choice":
            return Answer(id=request.id, value=_choice(request, value))
        case "text":
            text = value if isinstance(value, str) else json.dumps(value)
            return Answer(id=request.id, value=text)
        case "schema":
            return Answer(id=request.id, value=_against_schema(request, value))


def give_answers(checkpoint: Checkpoint, answers: Mapping[str, JsonValue | Answer]) -> None:
    """Answer the run's open requests (by id): each value is checked against its request's
    form (`yes`/`no`, a choice or its number, text, JSON for a form), or is an `Answer` of
    its own (`action="decline"`). Raises AnswerRefused, naming the open requests, for an id
    that is not one, and for a value that does not fit. An answer given after its request's
    `expires_at` is recorded as late (`Checkpoint.asked.late`)."""
    waiting = {r.id: r for r in checkpoint.open_requests()}
    for key, value in answers.items():
        request = waiting.get(key)
        if request is None:
            if key in checkpoint.asked.answers:
                raise AnswerRefused(f"request {key} was answered already")
            listed = ", ".join(waiting) or "none"
            raise AnswerRefused(f"the run waits for no request {key!r} (open: {listed})")
        if isinstance(value, Answer):
            given = check_answer(request, value.value, action=value.action)
        else:
            given = check_answer(request, value)
        late = request.expires_at is not None and time.time() > request.expires_at
        checkpoint.answer(given, late=late)


def _yes_no(request: InputRequest, value: JsonValue) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in YES:
        return True
    if word in NO:
        return False
    raise AnswerRefused(f"{request.id} asks yes or no; {str(value)[:80]!r} is neither")


def _choice(request: InputRequest, value: JsonValue) -> str:
    choices = request.choices or []
    text = str(value).strip()
    if text in choices:
        return text
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    folded = [c for c in choices if c.lower() == text.lower()]
    if len(folded) == 1:
        return folded[0]
    listed = ", ".join(f"{i}. {c}" for i, c in enumerate(choices, 1))
    raise AnswerRefused(f"{request.id} takes one of: {listed}; not {text[:80]!r}")


def _against_schema(request: InputRequest, value: JsonValue) -> JsonValue:
    from .output import OutputInvalid, output_spec  # jsonschema: loaded only for a form

    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except json.JSONDecodeError as exc:
            raise AnswerRefused(f"{request.id} asks for JSON ({exc.msg})") from exc
    try:
        spec = output_spec(request.input_schema or {})
        spec.validate(data)
    except (OutputInvalid, ConfigError) as exc:
        raise AnswerRefused(f"the answer to {request.id} does not fit its form: {exc}") from exc
    return data


def request_lines(requests: Sequence[InputRequest]) -> list[str]:
    """The open requests as a person reads them: who asks, the id to answer, the form.
    The question is quoted: it is data from a model or a remote, not ours."""
    lines = []
    for r in requests:
        form = {
            "yes_no": "yes/no",
            "choice": "one of: " + ", ".join(f"{i}. {c}" for i, c in enumerate(r.choices or [], 1)),
            "text": "text",
            "schema": "JSON (a form)",
        }[r.form]
        lines.append(f"{r.id}  {r.source} asks ({r.kind}; answer {form}): {json.dumps(r.question)}")
    return lines


async def ask_user(question: str, ctx: ToolContext, choices: list[str] | None = None) -> str:
    """Ask the user a question when you cannot go on without their answer: a missing input,
    or a choice between readings of the task you cannot settle yourself. Do not ask what you
    can find out with your tools. The run may pause until the user answers.

    Args:
        question: the question, complete and short
        choices: the answers to pick from, when the answer is one of a few
    """
    form: InputForm = "choice" if choices else "text"
    request = new_request(
        ctx, "question", question, source=f"agent {ctx.agent}", form=form, choices=choices
    )
    answer = await answer_for(ctx, request)
    if answer.action != "accept":
        by = "the run's policy" if answer.by.startswith("policy") else "the user"
        return f"The question was not answered ({answer.action}d by {by}): go on without it."
    return str(answer.value)


ASK_USER = Tool(ask_user, name="ask_user")
