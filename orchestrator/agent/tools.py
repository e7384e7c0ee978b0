"""Tools: `@tool` turns a plain function into something a model can call.

The schema comes from the function itself: type hints through pydantic, the docstring's summary
as the description, and per-parameter text from a Google-style `Args:` section. A parameter
annotated `ToolContext` is injected by the loop and never shown to the model.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from ..errors import ConfigError
from ..messages import ToolSpec
from .threads import run_in_thread

if TYPE_CHECKING:
    from ..models.base import ChatModel
    from ..trace import Trace
    from .budget import TokenBudget

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?|Notes?):\s*$"
)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class Toolset:
    """The tools of one agent run, in the order they were added.

    Tools may be added while the run goes on (a loaded skill adds its own). A tool added with
    `advertise=False` can be called but is not in `specs`, the tools array every request
    sends: that array then stays the same from the first request to the last, and provider
    prompt caches keep the whole prefix (see dispatch.py). Advertised tools added later are
    appended, so the schemas sent before keep their place.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: tuple[ToolSpec, ...] = ()
        self._advertised: set[str] = set()
        for item in tools:
            self.add(item)

    def add(self, item: Tool, *, advertise: bool = True) -> bool:
        """Add a tool; False if one of that name is already there (the first one stays)."""
        if item.name in self._tools:
            return False
        self._tools[item.name] = item
        if advertise:
            self._specs = (*self._specs, item.spec)
            self._advertised.add(item.name)
        return True

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def advertised(self, name: str) -> bool:
        """Whether the tool is in the tools array the model is sent."""
        return name in self._advertised

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


@dataclass
class ToolContext:
    """What the loop hands a tool that asks for it (a parameter annotated `ToolContext`).

    `agent` is the calling agent's path; `toolset` is its run's tools (extensions add to it);
    `state` is shared by every tool of one run, for extensions to keep their per-run state;
    `budget`, `trace` and `model` are the run's own, for extensions that start agents of
    their own (a sub-agent draws from the same budget and writes to the same trace), and
    `children` collects the results of those agents for the run's result. `guards` check every
    call before it starts, and `approve` is the run's approval callback (agent/approval.py);
    sub-agents get the same.
    """

    agent: str
    toolset: Toolset = field(default_factory=lambda: Toolset())
    permissions: Any = None
    state: dict[str, Any] = field(default_factory=dict)
    budget: TokenBudget | None = None
    trace: Trace | None = None
    model: ChatModel | None = None
    depth: int = 0
    children: list[Any] = field(default_factory=list)
    guards: list[Any] = field(default_factory=list)
    approve: Any = None


class ArgumentsError(ValueError):
    """The model's arguments could not be used: not JSON, or not what the schema asks for."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class Tool:
    """A callable tool: a function, its schema, and how it must be run.

    A `resumable` tool is safe to call again when a run resumes: it has no effects outside the
    run (`load_skill`, `read_task_output`), or it resumes itself from the trace (`fork`). A
    resumed run calls it again where an earlier attempt was cut off in it, instead of
    answering `aborted`.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        exclusive: bool = False,
        resumable: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not TOOL_NAME.match(self.name):
            raise ConfigError(f"tool name {self.name!r} must match {TOOL_NAME.pattern}")
        summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
        self.description = description or summary or self.name
        self.timeout = timeout
        self.exclusive = exclusive
        self.resumable = resumable
        self.is_async = inspect.iscoroutinefunction(fn)
        self.args_model, self.context_param = _arguments_model(fn, self.name, arg_docs)
        self.spec = ToolSpec(
            name=self.name,
            description=self.description,
            parameters=_clean_schema(self.args_model.model_json_schema()),
        )

    def renamed(self, name: str) -> Tool:
        """The same tool under another name (skills prefix theirs with the skill name)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.name = name
        clone.spec = self.spec.model_copy(update={"name": name})
        return clone

    def rebound(self, fn: Callable[..., Any]) -> Tool:
        """The same tool (name, schema, settings) calling `fn`, a function of the same
        signature (another object's bound method, say), without building the schema again."""
        clone = object.__new__(Tool)
        clone.__dict__.update(self.__dict__)
        clone.fn = fn
        return clone

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        """Validate the model's raw JSON arguments into keyword arguments for the function."""
        data = decode_arguments(raw)
        try:
            validated = self.args_model.model_validate(data)
        except ValidationError as exc:
            raise ArgumentsError(_describe_validation(exc), kind="invalid_arguments") from None
        return {name: getattr(validated, name) for name in type(validated).model_fields}

    async def invoke(self, kwargs: dict[str, Any], context: ToolContext) -> Any:
        """Run the function; sync functions run in a daemon thread of their own, so the event
        loop stays free and a call that never returns cannot hold up the run's end."""
        if self.context_param:
            kwargs = {**kwargs, self.context_param: context}
        if self.is_async:
            return await self.fn(**kwargs)
        return await run_in_thread(self.fn, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    exclusive: bool = False,
    resumable: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    exclusive: bool = False,
    resumable: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a sync or async function: `@tool` or `@tool(name=..., timeout=...)`.

    `timeout` is in seconds; an `exclusive` tool runs alone, after the calls before it
    in the same turn have finished and before the ones after it start. A `resumable` tool is
    called again when a resumed run was cut off in it (see `Tool`).
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            timeout=timeout,
            exclusive=exclusive,
            resumable=resumable,
        )

    return wrap(fn) if fn is not None else wrap


def as_tool(obj: Tool | Callable[..., Any]) -> Tool:
    """Accept a Tool or a plain function wherever tools are given."""
    return obj if isinstance(obj, Tool) else Tool(obj)


def decode_arguments(raw: str) -> dict[str, Any]:
    """The model's raw arguments as a JSON object; ArgumentsError when they are not one."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ArgumentsError(
            f"Arguments are not valid JSON ({exc.msg} at position {exc.pos}). "
            "Send the arguments as one JSON object.",
            kind="invalid_json",
        ) from None
    except RecursionError:
        raise ArgumentsError(
            "Arguments are nested too deeply to read. Send a flatter JSON object.",
            kind="invalid_json",
        ) from None
    if not isinstance(data, dict):
        raise ArgumentsError(
            f"Arguments must be a JSON object, not {type(data).__name__}.", kind="invalid_json"
        )
    return data


def render_result(value: Any) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph and the `Args:` entries of a Google-style docstring."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        indent = len(line) - len(line.lstrip())
        if header:
            section, current, entry_indent = header.group(1), None, None
        elif section is None:
            if line.strip():
                summary.append(line.strip())
            elif summary:
                section = "body"
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            entry = _ARG_LINE.match(line)
            if entry and (entry_indent is None or indent <= entry_indent):
                entry_indent = indent
                current = entry.group(1)
                args[current] = entry.group(2).strip()
            elif current:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return " ".join(summary), args


def _arguments_model(
    fn: Callable[..., Any], tool_name: str, arg_docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"tool {tool_name!r}: *args and **kwargs cannot be described")
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        if isinstance(default, FieldInfo):
            info = default
            if info.description is None and param.name in arg_docs:
                info = FieldInfo.merge_field_infos(info, description=arg_docs[param.name])
        else:
            info = Field(default, description=arg_docs.get(param.name))
        fields[param.name] = (annotation, info)
    model = create_model(_model_name(tool_name), __config__=ConfigDict(extra="forbid"), **fields)
    return model, context_param


def _is_context(annotation: Any) -> bool:
    """`ToolContext`, or `ToolContext | None` for a parameter with a default of None."""
    return annotation is ToolContext or ToolContext in get_args(annotation)


def _model_name(tool_name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[_\-]+", tool_name)) or "Arguments"


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles: they cost tokens and tell the model nothing."""

    def clean(node: Any, *, is_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                key: clean(
                    value, is_properties=key in ("properties", "$defs") and not is_properties
                )
                for key, value in node.items()
                if is_properties or key != "title"
            }
        if isinstance(node, list):
            return [clean(item) for item in node]
        return node

    return clean(schema)


def _describe_validation(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        problem = error["msg"]
        if error["type"] == "extra_forbidden":
            problem = "unexpected argument"
        problems.append(f"- {where}: {problem}")
    return "Arguments do not match the tool's schema:\n" + "\n".join(problems)
