"""A deterministic model that replays a script of turns, keyed by agent.

Tests and offline examples run every real path (tools, skills, the DAG, the budget, the trace)
with only the model's decisions written down in advance. Each run follows the script on its
own (a request says which run it belongs to: `ModelRequest.run`), so one model serves
concurrent runs of one agent, each from the first turn.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ScriptExhausted
from ..messages import Message, ToolCall, Usage
from ..security.inputs import JsonInputError, YamlInputError, load_json, load_yaml
from ..security.inventory import reads
from ..tokens import default_counter
from .base import Model, ModelRequest, ModelResponse, OutputMode
from .settings import WireOptions

Turn = Mapping[str, Any]
FALLBACK = "*"
_TURN_KEYS = {"content", "tool_calls", "reasoning", "latency"}
SCRIPTED_OUTPUT_MODES: tuple[OutputMode, ...] = ("native", "tool", "prompted")


class ScriptedModel(Model):
    """Replays `{agent: [turn, ...]}`; the key `"*"` serves agents without their own list.

    An agent at path `planner/review` takes turns from `"planner/review"`, else `"review"`,
    else `"*"`. Each run keeps its own place in each list (and numbers its own tool calls,
    `call_1`, `call_2`, ...): runs of one agent, at the same time or one after another, each
    take the turns from the first; the agents of one run that share a key (`"*"`) take its
    turns in the order they ask. A turn is `{"content": ...}` and/or `{"tool_calls": [{"name": ...,
    "arguments": {...} or a raw string}]}`. When a request disables tools, a turn with both
    answers with its content alone (as a real model would); one with calls only is a script
    error. A turn's `latency` (seconds) makes that one call slow, on top of the model's
    `latency`. Every request is kept in `requests`. `context_window` plays a model with that
    window (models/window.py): agents keep their requests within it; `compact_at` and
    `max_output_tokens` are those a real model's settings would give.
    """

    def __init__(
        self,
        script: Mapping[str, Sequence[Turn]] | str | Path,
        *,
        latency: float = 0.0,
        name: str = "scripted",
        context_window: int | None = None,
        compact_at: float | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if isinstance(script, str | Path):
            script = load_script(script)
        self.script = {
            agent: [_check_turn(agent, i, t) for i, t in enumerate(turns)]
            for agent, turns in _check_script(script).items()
        }
        self.latency = latency
        self.name = name
        self.options = WireOptions(
            context_window=context_window,
            compact_at=compact_at,
            max_output_tokens=max_output_tokens,
        )
        self.requests: list[ModelRequest] = []
        self._position: dict[tuple[str, str], int] = {}  # (run, script key): turns served
        self._call_ids: dict[str, itertools.count[int]] = {}  # per run
        self._counter = default_counter()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        key = self._key_for(request.agent)
        position = self._position.get((request.run, key), 0) if key else 0
        turns = self.script.get(key, []) if key else []
        if key is None or position >= len(turns):
            where = f"its script key {key!r} has {len(turns)} turns" if key else "no script key"
            raise ScriptExhausted(
                f"scripted model: no turn left for agent {request.agent!r} ({where}; "
                f"this was call {position + 1} of its run)"
            )
        self._position[(request.run, key)] = position + 1
        turn = turns[position]
        if turn.get("tool_calls") and request.tool_choice == "none":
            # Tools are disabled (the last step's forced answer, a budget wrap-up): answer with
            # the turn's text alone, as a model told not to call tools would; with none, an
            # empty answer, which the run reports as its step cap or budget ended it.
            turn = {"content": turn.get("content") or ""}
        delay = self.latency + float(turn.get("latency") or 0)
        if delay:
            await asyncio.sleep(delay)
        message = self._message(turn, self._ids(request.run))
        if not message.tool_calls:
            request.text(message.content)
        input_tokens = self._counter.count_request(request.messages, request.tools)
        usage = Usage.of(input_tokens, self._counter.count_message(message))
        finish = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(message=message, usage=usage, finish_reason=finish)

    @property
    def output_modes(self) -> tuple[OutputMode, ...]:
        """Any: the script writes the answers, whatever a request asks for. Native first: a
        turn's `content` is the JSON answer, as a provider's native structured output is."""
        return SCRIPTED_OUTPUT_MODES

    def fast_forward(self, agent: str, calls: int, *, run: str) -> None:
        """Count `calls` turns of `agent` as served already in run `run`: a resumed run's
        earlier attempts used them, and its agents go on with the turns after."""
        key = self._key_for(agent)
        if key is None:
            return
        start = self._position.get((run, key), 0)
        end = self._position[(run, key)] = min(len(self.script[key]), start + calls)
        # Their calls had ids: the run's new ones must not repeat them.
        ids = self._ids(run)
        self._call_ids[run] = itertools.count(next(ids) + _calls_in(self.script[key][start:end]))

    def unused_turns(self) -> dict[str, int]:
        """How many turns of each script key no run reached."""
        reached = dict.fromkeys(self.script, 0)
        for (_, key), position in self._position.items():
            reached[key] = max(reached[key], position)
        return {
            key: len(turns) - reached[key]
            for key, turns in self.script.items()
            if len(turns) > reached[key]
        }

    def assert_all_used(self) -> None:
        """Raise if any scripted turn was never asked for."""
        left = self.unused_turns()
        if left:
            raise AssertionError(f"scripted model: turns never used: {left}")

    def _key_for(self, agent: str) -> str | None:
        for key in (agent, agent.rsplit("/", 1)[-1], FALLBACK):
            if key in self.script:
                return key
        return None

    def _ids(self, run: str) -> itertools.count[int]:
        """The numbers of run `run`'s tool calls."""
        ids = self._call_ids.get(run)
        if ids is None:
            ids = self._call_ids[run] = itertools.count(1)
        return ids

    def _message(self, turn: Turn, ids: itertools.count[int]) -> Message:
        calls = [
            ToolCall(id=f"call_{next(ids)}", name=c["name"], arguments=c["arguments"])
            for c in turn.get("tool_calls") or ()
        ]
        return Message(
            role="assistant",
            content=turn.get("content"),
            tool_calls=tuple(calls),
            reasoning=turn.get("reasoning"),
        )


def _calls_in(turns: Sequence[Turn]) -> int:
    return sum(len(turn.get("tool_calls") or ()) for turn in turns)


@reads("file a spec names")
def load_script(path: str | Path) -> dict[str, list[Turn]]:
    """Read a script from a YAML (or, named `.json`, a JSON) file."""
    file = Path(path)
    # JSON is YAML too; a .json script is read as JSON, which is much faster for big scripts.
    try:
        text = file.read_text(encoding="utf-8")
        is_json = file.suffix.lower() == ".json"
        data = load_json(text, str(file)) if is_json else load_yaml(text, str(file))
    except OSError as exc:
        raise ConfigError(f"cannot read model script {file}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"model script {file} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
            f"{exc.start})"
        ) from None
    except YamlInputError as exc:
        raise ConfigError(f"model script {file} is not valid YAML: {exc.detail}") from None
    except JsonInputError as exc:
        raise ConfigError(f"model script {file} is not valid JSON: {exc.detail}") from None
    return _check_script(data, source=str(file))


def _check_script(data: Any, source: str = "script") -> dict[str, list[Turn]]:
    if not isinstance(data, Mapping) or not all(isinstance(turns, list) for turns in data.values()):
        raise ConfigError(f"{source}: a model script maps agent names to lists of turns")
    return {str(agent): list(turns) for agent, turns in data.items()}


def _check_turn(agent: str, index: int, turn: Any) -> Turn:
    """Check a turn and give each of its tool calls its raw JSON arguments, once."""
    where = f"script[{agent!r}][{index}]"
    if not isinstance(turn, Mapping) or not turn or set(turn) - _TURN_KEYS:
        raise ConfigError(f"{where}: a turn is a mapping with 'content' and/or 'tool_calls'")
    calls = []
    for call in turn.get("tool_calls") or ():
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ConfigError(f"{where}: each tool call needs a 'name'")
        calls.append({"name": call["name"], "arguments": _raw(call)})
    return {**turn, "tool_calls": calls} if calls else turn


def _raw(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments", {})
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
