"""Structured answers: an agent that returns validated data of a type it was given.

`OutputSpec` is what the answer must be: a Python type through pydantic's `TypeAdapter` (a
model, a dataclass, a TypedDict, a scalar, a union: its JSON Schema is the adapter's), or a JSON
Schema given as a dict (checked, and answers validated, with jsonschema, which the `[eval]` and
`[mcp]` extras bring). It reads an answer into a value, or says which fields fail, in words the
model can act on.

`StructuredOutput` is how one agent asks for it, in one of three modes (`OutputMode`):

- `tool`: a final-answer tool (`final_result`) whose parameters are the schema. It is in the
  tools array from the first request, so the array, and the provider's cached prefix that
  starts with it, stays the same to the last request. A valid call to it ends the run; the
  other calls of that turn are skipped.
- `native`: every request carries the schema (`ModelRequest.output_schema`) and the provider
  holds the reply's text to it. OpenAI's strict mode wants every object closed and every
  property required: the schema is rewritten so (`strict_schema`); one that cannot be (an open
  mapping) goes with `strict: false`, and the agent warns when it is built.
- `prompted`: the schema is in the system prompt, and the answer's text is parsed.

In the tool and native modes the schema must be an object: a scalar or a union is wrapped as
`{"result": ...}`. An answer's text may sit in a ```json fence. A JSON Schema is compiled once,
within bounds (bounded_schema.py), and answers are read in a worker thread. An answer holding
what JSON's numbers and text cannot (NaN, an infinity, a lone surrogate), or nested more than
`MAX_ANSWER_DEPTH` deep, is not valid whatever the type. An answer that does not
validate goes back to the model as an observation naming the failing fields (the final tool's
error result, or a user message) up to `retries` times, each try a model call on the same
budget and step cap; after that, or when no step is left, the run ends as `output_invalid` with
the last error and the raw answer.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.machinery
import json
import math
import re
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_args, overload

from pydantic import TypeAdapter, ValidationError

from ..errors import ConfigError
from ..events import RunStartFields
from ..messages import Message, ToolCall
from ..models.base import (
    ChatModel,
    ForcedTool,
    OutputMode,
    OutputSchema,
    ToolChoice,
    output_modes_of,
    unsupported_mode,
)
from ..security.inputs import JsonInputError, YamlInputError, load_json, load_yaml
from ..security.inventory import SCHEMA_FILE_SUFFIXES, reads
from .extension import Extension
from .tools import Tool, ToolContext

if TYPE_CHECKING:
    from ..trace import AgentHistory

T = TypeVar("T")

FINAL_TOOL = "final_result"
WRAP_KEY = "result"
OUTPUT_MODES: tuple[OutputMode, ...] = get_args(OutputMode)
MAX_SHOWN_INPUT = 80
MAX_PROBLEMS = 20
"""How many failing fields one retry note lists."""
MAX_ANSWER_DEPTH = 100
"""How deep an answer may nest (objects and arrays) to be checked."""
MAX_SCHEMA_FILE_BYTES = 1_000_000
"""The largest schema file read."""
TOO_COSTLY = (
    "checking it against the schema takes too much work (the schema's branches multiply "
    "over the answer's parts); give a smaller or simpler answer"
)
_FENCED = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```", re.DOTALL)
_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
DOTTED_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
NOTE_PREFIX = "[orchestrator] "
# How a retry note ends (`StructuredOutput._retry_note`): a resumed run counts them.
_RETRY_TAIL = re.compile(
    r"\nFix it and (?:call [\w-]+|answer) again \((?:\d+ tries left|this is your last try)\)\.\Z"
)


class OutputInvalid(ValueError):
    """An answer that is not what the output type asks for; the text says why, to the model."""


class _Mismatch(Exception):
    """Where a value breaks the schema and how, as (field path, problem) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__(problems)
        self.problems = problems


class OutputSpec(Generic[T]):
    """What an agent's answer must be: its JSON Schema, and how an answer becomes a `T`.

    Make one with `OutputSpec.of(SomeType)` or `OutputSpec.from_schema({...})`. `schema` is the
    value's schema; `object_schema` the one the tool and native modes send (`wrapped` says
    whether the value sits in `{"result": ...}`). `name` (the schema's title, made safe for a
    provider) and `description` (the type's docstring) go with it.
    """

    def __init__(
        self,
        schema: dict[str, Any],
        validate: Callable[[Any], T],
        dump: Callable[[T], str],
    ) -> None:
        self.schema = schema
        self._validate = validate
        self._dump = dump
        title = schema.get("title")
        name = _NOT_IN_NAME.sub("_", title).strip("_")[:64] if isinstance(title, str) else ""
        self.name = name or WRAP_KEY
        description = schema.get("description")
        self.description = description if isinstance(description, str) else None
        self.wrapped = not _is_object_schema(schema)
        self.object_schema = _wrapped(schema) if self.wrapped else schema

    @overload
    @staticmethod
    def of(output_type: type[T]) -> OutputSpec[T]: ...
    @overload
    @staticmethod
    def of(output_type: Any) -> OutputSpec[Any]: ...
    @staticmethod
    def of(output_type: Any) -> OutputSpec[Any]:
        """The spec of a Python type (anything pydantic's `TypeAdapter` takes)."""
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = adapter.json_schema()
        except Exception as exc:  # pydantic's schema errors have no common base
            raise ConfigError(f"output type {output_type!r} has no JSON Schema: {exc}") from None

        def validate(data: Any) -> Any:
            try:
                return adapter.validate_json(json.dumps(data))
            except ValidationError as exc:
                raise _Mismatch(_pydantic_problems(exc)) from None

        def dump(value: Any) -> str:
            return adapter.dump_json(value).decode()

        return OutputSpec(schema, validate, dump)

    @staticmethod
    def from_schema(schema: Mapping[str, Any]) -> OutputSpec[Any]:
        """The spec of a JSON Schema; answers come back as JSON values (dicts, lists, ...).

        The schema is compiled once, within bounds (agent/bounded_schema.py: its size and
        depth, its `$ref`s, its patterns on RE2). Raises ConfigError when jsonschema is not
        installed, or the schema is not valid JSON Schema or breaks a bound."""
        try:
            importlib.import_module("jsonschema")
        except ImportError:
            raise ConfigError(
                "an output type given as a JSON Schema needs the jsonschema package, a "
                "dependency of orchestrator: reinstall it (or give a Python type instead)"
            ) from None
        from .bounded_schema import TooCostly, compile_schema

        given = dict(schema)
        compiled = compile_schema(given)

        def validate(data: Any) -> Any:
            try:
                problems = compiled.mismatches(data)
            except TooCostly:
                raise _Mismatch([("", TOO_COSTLY)]) from None
            if problems:
                raise _Mismatch(problems)
            return data

        def dump(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False)

        return OutputSpec(given, validate, dump)

    def validate(self, data: Any, *, wrapped: bool = False) -> T:
        """A JSON value as a `T`; `wrapped`: the value is `data["result"]` when the spec wraps.
        Raises OutputInvalid naming the fields that fail (and those JSON cannot hold)."""
        prefix = ""
        if wrapped and self.wrapped:
            if not isinstance(data, dict) or set(data) != {WRAP_KEY}:
                raise OutputInvalid(
                    f'The answer must be a JSON object with one field, "{WRAP_KEY}", that holds '
                    "the value."
                )
            data, prefix = data[WRAP_KEY], WRAP_KEY
        not_json = _not_json(data)  # before the schema's checks, which recurse
        try:
            if not_json:
                raise _Mismatch(not_json)
            return self._validate(data)
        except RecursionError:
            raise OutputInvalid(
                "The answer is nested too deeply to check against the output schema."
            ) from None
        except _Mismatch as mismatch:
            lines = [
                f"- {'.'.join(filter(None, [prefix, where])) or '(the answer)'}: {problem}"
                for where, problem in mismatch.problems[:MAX_PROBLEMS]
            ]
            if len(mismatch.problems) > MAX_PROBLEMS:
                lines.append(f"- ... and {len(mismatch.problems) - MAX_PROBLEMS} more")
            heading = (
                "The answer is not JSON's numbers and text:\n"
                if not_json
                else "The answer does not match the output schema:\n"
            )
            raise OutputInvalid(heading + "\n".join(lines)) from None

    def parse(self, text: str, *, wrapped: bool = False) -> T:
        """An answer's JSON text (alone, or in a ```json fence) as a `T`."""
        body = text.strip()
        if not body.startswith(("{", "[", '"')) and (fenced := _FENCED.search(text)):
            body = fenced.group(1).strip()
        try:
            # A raw newline or tab inside a string is a common slip of a small model (even
            # under a grammar): read as the escape it stands for, not refused.
            data = json.loads(body, strict=False)
        except (ValueError, RecursionError) as exc:
            detail = (
                f" ({exc.msg} at position {exc.pos})"
                if isinstance(exc, json.JSONDecodeError)
                else ""
            )
            raise OutputInvalid(
                f"The answer is not valid JSON{detail}. Answer with the JSON value alone."
            ) from None
        return self.validate(data, wrapped=wrapped)

    def dump(self, value: T) -> str:
        """A valid value as JSON text."""
        return self._dump(value)

    def __repr__(self) -> str:
        return f"OutputSpec({self.name!r}, wrapped={self.wrapped})"


def output_spec(output_type: object) -> OutputSpec[Any]:
    """An OutputSpec as it is, a JSON Schema dict through jsonschema, a type through pydantic."""
    if isinstance(output_type, OutputSpec):
        return output_type
    if isinstance(output_type, Mapping):
        return OutputSpec.from_schema(output_type)
    return OutputSpec.of(output_type)


def load_output_spec(
    source: Mapping[str, Any] | str, folder: Path, *, refused: Sequence[Path] = ()
) -> OutputSpec[Any]:
    """The output spec a job spec or a sub-agent definition names (`output_schema:`): a JSON
    Schema given inline, a JSON or YAML file of one (`folder` is where a relative path starts),
    or the dotted path of a Python type (`schemas.Invoice`), its module looked up in `folder`
    first, then among the installed ones. Code inside `refused` folders (the workspace, which
    the model writes) is never imported. Raises ConfigError saying what is wrong."""
    if isinstance(source, Mapping):
        return OutputSpec.from_schema(source)
    if source.endswith(SCHEMA_FILE_SUFFIXES):
        path = (folder / source).expanduser().resolve()
        schema = _schema_file(path)
        try:
            return OutputSpec.from_schema(schema)
        except ConfigError as exc:
            raise ConfigError(f"the schema file {path}: {exc}") from None
    if not DOTTED_PATH.match(source):
        raise ConfigError(
            f"{source!r} is neither a schema file ({', '.join(SCHEMA_FILE_SUFFIXES)}) nor the "
            "dotted path of a Python type (module.Type)"
        )
    return OutputSpec.of(_imported_type(source, folder.resolve(), refused))


@reads("file a spec names")
def _schema_file(path: Path) -> dict[str, Any]:
    """A schema file's JSON Schema, read with the bounded readers (security/inputs.py): a
    file over `MAX_SCHEMA_FILE_BYTES`, nested too deeply for Python, or whose YAML aliases
    expand too far is refused."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_SCHEMA_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"the schema file {path} cannot be read ({exc})") from None
    if len(raw) > MAX_SCHEMA_FILE_BYTES:
        raise ConfigError(
            f"the schema file {path} is over {MAX_SCHEMA_FILE_BYTES:,} bytes; it is not read"
        )
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        loaded = (
            load_json(raw, str(path))
            if kind == "JSON"
            else load_yaml(raw.decode("utf-8"), str(path))
        )
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the schema file {path} is not UTF-8 text ({exc.reason})") from None
    except (JsonInputError, YamlInputError) as exc:
        raise ConfigError(f"the schema file {path} is not valid {kind}: {exc.detail}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"the schema file {path} does not hold a JSON Schema object")
    return loaded


def _imported_type(dotted: str, folder: Path, refused: Sequence[Path]) -> object:
    """The object at `module.attribute`, its module from `folder` or installed."""
    module_name, _, attribute = dotted.rpartition(".")
    top = module_name.partition(".")[0]
    local = importlib.machinery.PathFinder.find_spec(top, [str(folder)]) is not None
    if local:
        sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an import runs the module's code: any error may come of it
        raise ConfigError(f"{dotted!r} does not import: {type(exc).__name__}: {exc}") from None
    finally:
        if local:
            sys.path.remove(str(folder))
    where = Path(module.__file__).resolve() if module.__file__ else None
    if where is not None and local and not where.is_relative_to(folder):
        raise ConfigError(f"module {module_name!r} is already imported from {where}")
    if where is not None and any(where.is_relative_to(p.resolve()) for p in refused):
        raise ConfigError(
            f"{dotted!r} lies in {where}, inside the workspace the model writes: its code is "
            "not imported"
        )
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ConfigError(f"module {module_name!r} has no {attribute!r}") from None


@dataclass(frozen=True)
class Verdict:
    """What one final answer came to.

    Valid: `value`, and `output` its JSON text. Not valid: `error` says why (what the model is
    told), `output` is the answer as written, and `retry` whether the model gets another try.
    `note` (text modes) is the message that tells it; `results` (tool mode) are the results of
    the turn's calls known now, in order (None: a call still to run).
    """

    valid: bool
    value: object = None
    output: str = ""
    error: str | None = None
    retry: bool = False
    note: Message | None = None
    results: tuple[Message | None, ...] = ()


class OutputTries:
    """A run's answers that did not validate (per run, in its ToolContext)."""

    def __init__(self) -> None:
        self.failed = 0


class StructuredOutput(Extension, Generic[T]):
    """One agent's structured answer: the spec, the mode, and how many retries it gets.

    An extension of the agent: the final-answer tool (tool mode) and the schema section of the
    system prompt (prompted mode) join the agent's tools and prompt when it is built. The loop
    asks it to judge every final answer (`check_text`, `check_calls`).
    """

    def __init__(self, spec: OutputSpec[T], mode: OutputMode, retries: int) -> None:
        if mode not in OUTPUT_MODES:
            raise ConfigError(f"output_mode {mode!r} is not one of {', '.join(OUTPUT_MODES)}")
        if retries < 0:
            raise ConfigError("output_retries must be 0 or more")
        self.spec = spec
        self.mode = mode
        self.retries = retries
        self.tool = final_tool(spec) if mode == "tool" else None
        self.request_schema = native_schema(spec) if mode == "native" else None

    def system_prompt(self) -> str | None:
        if self.mode != "prompted":
            return None
        schema = json.dumps(self.spec.schema, ensure_ascii=False)
        return (
            "## Final answer\n\n"
            "Your final answer is one JSON value that follows this JSON Schema, with no other "
            f"text around it:\n\n```json\n{schema}\n```"
        )

    def tools(self) -> Sequence[Tool]:
        return [self.tool] if self.tool is not None else []

    def start_record(self) -> RunStartFields:
        return {"output": {"mode": self.mode, "name": self.spec.name}}

    def restore(
        self, context: ToolContext, history: AgentHistory, messages: Sequence[Message]
    ) -> None:
        """A resumed run goes on counting the answers that did not validate: each got a retry
        note, and the conversation it goes on from holds them."""
        context.state_of(OutputTries).failed = sum(1 for m in messages if _is_retry_note(m))

    def last_choice(self) -> ToolChoice:
        """The tool choice of the last step: the final-answer tool, or no tool."""
        return ForcedTool(self.tool.name) if self.tool is not None else "none"

    def answers_by_tool(self, calls: Sequence[ToolCall]) -> bool:
        """Whether a turn's calls give the final answer (tool mode)."""
        return self.tool is not None and any(call.name == self.tool.name for call in calls)

    async def check_text(self, context: ToolContext, text: str, *, can_retry: bool) -> Verdict:
        """A final answer written as text."""
        try:
            if self.tool is not None:
                raise OutputInvalid(
                    f"Give your final answer by calling {self.tool.name}, not as text."
                )
            value, output = await asyncio.to_thread(self._read_text, text)
        except OutputInvalid as exc:
            retry = self._failed(context, can_retry)
            note = (
                Message.user(NOTE_PREFIX + self._retry_note(context, str(exc))) if retry else None
            )
            return Verdict(valid=False, output=text, error=str(exc), retry=retry, note=note)
        return Verdict(valid=True, value=value, output=output)

    def _read_text(self, text: str) -> tuple[T, str]:
        value = self.spec.parse(text, wrapped=self.mode == "native")
        return value, self.spec.dump(value)

    def _read_arguments(self, arguments: str) -> tuple[T, str]:
        value = self.spec.validate(_arguments(arguments), wrapped=True)
        return value, self.spec.dump(value)

    async def check_calls(
        self, context: ToolContext, calls: Sequence[ToolCall], *, can_retry: bool
    ) -> Verdict:
        """A turn that calls the final-answer tool: the first such call is the answer.

        Answers are read in a worker thread (as `check_text` reads them): a check that takes
        long (it is bounded: agent/bounded_schema.py) does not hold the event loop, so the
        run's other tasks and its time limit go on."""
        assert self.tool is not None
        name = self.tool.name
        index = next(i for i, call in enumerate(calls) if call.name == name)
        final = calls[index]

        def others(reason: str, *, run: bool) -> list[Message | None]:
            return [
                None
                if run and call.name != name
                else Message.tool_result(call, f"Skipped: {reason}.", error_type="skipped")
                for call in calls
            ]

        try:
            value, output = await asyncio.to_thread(self._read_arguments, final.arguments)
        except OutputInvalid as exc:
            retry = self._failed(context, can_retry)
            text = self._retry_note(context, str(exc)) if retry else str(exc)
            results = others(
                "only one final answer is read per turn" if retry else "the run has ended",
                run=retry,
            )
            results[index] = Message.tool_result(final, text, error_type="invalid_arguments")
            return Verdict(
                valid=False,
                output=final.arguments,
                error=str(exc),
                retry=retry,
                results=tuple(results),
            )
        results = others("the final answer was given in the same turn", run=False)
        results[index] = Message.tool_result(final, "Final answer accepted.")
        return Verdict(valid=True, value=value, output=output, results=tuple(results))

    def _failed(self, context: ToolContext, can_retry: bool) -> bool:
        """Count a failed answer; True when the model gets another try."""
        tries = context.state_of(OutputTries)
        tries.failed += 1
        return can_retry and tries.failed <= self.retries

    def _retry_note(self, context: ToolContext, error: str) -> str:
        left = self.retries - context.state_of(OutputTries).failed + 1  # the next one counts
        again = f"call {self.tool.name} again" if self.tool is not None else "answer again"
        tries = "this is your last try" if left == 1 else f"{left} tries left"
        return f"{error}\nFix it and {again} ({tries})."

    def __repr__(self) -> str:
        return f"StructuredOutput({self.spec.name!r}, mode={self.mode!r})"


def structured_output(
    output_type: object,
    mode: OutputMode | None,
    model: ChatModel,
    retries: int,
) -> StructuredOutput[Any] | None:
    """How an agent on `model` asks for `output_type` (None: it answers in text).

    The mode is `mode`, else the model's default (models/base.py: `Model.output_modes`);
    ConfigError when the model cannot give it."""
    if output_type is None:
        if mode is not None:
            raise ConfigError("output_mode is set, but there is no output_type to ask for")
        return None
    allowed = output_modes_of(model)
    chosen = mode or allowed[0]
    refusal = unsupported_mode(model.name, chosen, allowed) if chosen in OUTPUT_MODES else None
    if refusal is not None:
        raise ConfigError(refusal)
    return StructuredOutput(output_spec(output_type), chosen, retries)


def _is_retry_note(message: Message) -> bool:
    """A note that sent an answer back to be fixed: a user message of the loop's, or the
    final tool's error result."""
    if message.role == "user":
        ours = (message.content or "").startswith(NOTE_PREFIX)
    else:
        ours = message.role == "tool" and message.name == FINAL_TOOL
        ours = ours and message.error_type == "invalid_arguments"
    return ours and _RETRY_TAIL.search(message.content or "") is not None


def final_tool(spec: OutputSpec[Any]) -> Tool:
    """The final-answer tool: its parameters are the answer's (object) schema."""
    found = Tool(
        _final_result,
        name=FINAL_TOOL,
        description=spec.description
        or "Give your final answer: its arguments are the answer. The run ends when it is valid.",
    )
    found.spec = found.spec.model_copy(update={"parameters": spec.object_schema})
    return found


def _final_result() -> str:
    # The loop answers every call to the final-answer tool itself; a batch runs this only for
    # a call it finds cut off in a resumed run's trace, whose answer was never read.
    return f"This answer was not read (the run was resumed): call {FINAL_TOOL} again."


def native_schema(spec: OutputSpec[Any]) -> OutputSchema:
    """What a native-mode request carries: the schema made strict where it can be (warning
    when it cannot)."""
    schema, reason = strict_schema(spec.object_schema)
    if reason is not None:
        warnings.warn(
            f"the output schema {spec.name!r} cannot be made strict ({reason}): it is sent "
            "with strict false, so the provider may not hold the answer to it (answers are "
            "still validated)",
            UserWarning,
            stacklevel=4,
        )
        return OutputSchema(spec.name, spec.object_schema, False, spec.description)
    return OutputSchema(spec.name, schema, True, spec.description)


def strict_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """`schema` rewritten for a strict structured-output mode (OpenAI's rules): every object
    closed (`additionalProperties: false`) with all its properties required, a `$ref` that has
    sibling keywords inlined, `oneOf` as `anyOf` (a discriminated union's branches are
    disjoint), and no `default: null`. The second value says why it cannot be strict (an open
    mapping: an object of any keys); None when it can."""
    defs = schema.get("$defs")
    problems: list[str] = []

    def resolve(ref: object) -> dict[str, Any] | None:
        prefix = "#/$defs/"
        if isinstance(ref, str) and ref.startswith(prefix) and isinstance(defs, dict):
            found = defs.get(ref.removeprefix(prefix))
            return found if isinstance(found, dict) else None
        return None

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, list):
            return [walk(item, where) for item in node]
        if not isinstance(node, dict):
            return node
        target = resolve(node["$ref"]) if "$ref" in node and len(node) > 1 else None
        node, problem = _strict_node(node, target)
        if problem:
            problems.append(f"{where or 'the answer'} {problem}")
        for key in ("properties", "$defs"):
            if isinstance(node.get(key), dict):
                node[key] = {
                    name: walk(sub, f"{where}.{name}".lstrip("."))
                    for name, sub in node[key].items()
                }
        for key in ("items", "additionalProperties", "not"):
            if isinstance(node.get(key), dict):
                node[key] = walk(node[key], f"{where}[]" if key == "items" else where)
        for key in ("anyOf", "allOf", "prefixItems"):
            if isinstance(node.get(key), list):
                node[key] = walk(node[key], where)
        return node

    strict: dict[str, Any] = walk(schema, "")
    return strict, "; ".join(dict.fromkeys(problems)) or None


def _strict_node(
    node: Mapping[str, Any], target: Mapping[str, Any] | None
) -> tuple[dict[str, Any], str | None]:
    """One schema node made strict, its children aside (`target`: what its `$ref` points
    to, when the ref has siblings); and what keeps it from being strict."""
    strict = dict(node)
    if target is not None:
        strict = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    if "oneOf" in strict and "anyOf" not in strict:
        strict["anyOf"] = strict.pop("oneOf")
    strict.pop("discriminator", None)
    if "default" in strict and strict["default"] is None:
        del strict["default"]
    if strict.get("type") != "object" and "properties" not in strict:
        return strict, None
    extra = strict.get("additionalProperties")
    if (
        extra not in (None, False)
        or "patternProperties" in strict
        or ("properties" not in strict and extra is None)
    ):
        return strict, "is an object of any keys"
    strict["additionalProperties"] = False
    strict["required"] = list(strict.get("properties") or {})
    return strict, None


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "object" and not {"anyOf", "oneOf", "$ref"} & schema.keys()


def _wrapped(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`{"result": schema}` as an object schema; `$defs` stay at the top, where refs look."""
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {WRAP_KEY: inner},
        "required": [WRAP_KEY],
    }
    if "$defs" in schema:
        wrapper["$defs"] = schema["$defs"]
    return wrapper


def _arguments(raw: str) -> Any:
    try:
        return json.loads(raw, strict=False) if raw.strip() else {}
    except (ValueError, RecursionError):
        raise OutputInvalid(
            "The arguments are not valid JSON. Send the answer as one JSON object."
        ) from None


def _pydantic_problems(exc: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"])
        problem = error["msg"]
        if error["type"] == "extra_forbidden":
            problem = "unexpected field"
        elif error["type"] != "missing":
            shown = json.dumps(error.get("input"), ensure_ascii=False, default=str)
            if len(shown) > MAX_SHOWN_INPUT:
                shown = shown[: MAX_SHOWN_INPUT - 3] + "..."
            problem = f"{problem} (got {shown})"
        problems.append((where, problem))
    return problems


def _not_json(data: Any) -> list[tuple[str, str]]:
    """Where a value read from an answer holds what JSON's numbers and text cannot be:
    Python's reader takes `NaN`, `Infinity` and `1e999` as floats that are not finite, and
    an escaped lone surrogate (`"\\ud800"`) as a string no UTF-8 text can hold. An answer
    nested deeper than `MAX_ANSWER_DEPTH` raises OutputInvalid. (field path, problem) pairs."""
    problems: list[tuple[str, str]] = []
    pending: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while pending and len(problems) <= MAX_PROBLEMS:
        value, path = pending.pop()
        where = ".".join(path)
        if len(path) > MAX_ANSWER_DEPTH:
            raise OutputInvalid(
                f"The answer is nested more than {MAX_ANSWER_DEPTH} deep (objects and arrays); "
                "deeper answers are not read. Flatten it."
            )
        if isinstance(value, float) and not math.isfinite(value):
            shown = "NaN" if math.isnan(value) else "an infinite number"
            problems.append((where, f"{shown} is not a JSON number; write a finite number"))
        elif isinstance(value, str) and _lone_surrogate(value):
            problems.append((where, f"{_SURROGATE}, which is not text"))
        elif isinstance(value, dict):
            for key, item in value.items():
                if _lone_surrogate(key):
                    problems.append((where, f"a field name {_SURROGATE}, which is not text"))
                else:
                    pending.append((item, (*path, key)))
        elif isinstance(value, list):
            pending.extend((item, (*path, str(index))) for index, item in enumerate(value))
    return sorted(problems)


_SURROGATE = "holds an escaped lone surrogate (\\ud800 to \\udfff)"


def _lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
