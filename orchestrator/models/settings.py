"""What a model is resolved with: its options, the provider presets, and `ModelSettings`.

    model: openai-compatible:qwen3                 # a name alone
    model: {name: openai-compatible:qwen3, base_url: http://127.0.0.1:8080/v1, stream: false,
            timeout: 120, max_output_tokens: 2048, temperature: 0, api_key_env: MY_KEY}

The options come in three sets, each a pydantic model: `ConnectionSettings` (where the server
is and how to reach it: the connection in http.py), and the wire options of each format,
`OpenAIOptions` (Chat Completions, openai.py) and `AnthropicOptions` (Messages, anthropic.py),
both over the `WireOptions` every HTTP adapter shares. A preset (`PRESETS`: `openai:`,
`anthropic:`, `deepseek:`, `ollama:`, `openai-compatible:`) names a wire format, a default base
URL and where the environment keeps the base URL and the key.

`ModelSettings` is a model and its options as job specs, sub-agents and alias tables write
them: every key besides `name` and `api_key_env` is an option of `resolve_model`, generated
from the three sets so they never drift apart. A key itself (`api_key`) is refused: a file may
be shared or committed, so it names the environment variable that holds the key instead. A
name without a `:` is an alias (`sonnet`, or one of the user's), expanded by `ModelAliases`
(resolve.py).

Nothing here imports httpx or an adapter: a spec can be read and checked offline.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SecretStr,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, InitErrorDetails, PydanticCustomError, ValidationError

from ..errors import ConfigError

CacheTTL = Literal["5m", "1h"]
OutputFormat = Literal["json_schema", "json_object"]
OutputMode = Literal["tool", "native", "prompted"]
"""How an agent asks a model for a structured answer (agent/output.py): through a final-answer
tool, through the provider's own JSON Schema output (`ModelRequest.output_schema`), or with the
schema in the system prompt."""
JITTER = 0.25


class WireOptions(BaseModel):
    """Options every HTTP adapter shares. Each can be passed to `resolve_model`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    stream: bool = True
    """Stream the reply (server-sent events); False waits for the whole reply."""
    stream_fallback: bool = True
    """When a server cannot serve a request as a stream (it closes the stream before its first
    event, or ends it before the reply), send the request once more without streaming, and
    send requests of that shape to that server whole from then on; the trace records a
    `model_stream_fallback` event. False: fail at once, naming the `stream` setting."""
    temperature: float | None = Field(None, ge=0)
    """Sampling temperature sent with every request; None sends none (the server's default)."""
    max_output_tokens: int | None = Field(None, ge=1)
    """The most tokens one reply may have. The agents of a job or a planner reserve this much
    of the budget per call (4096 by default); a request never asks for more than its agent
    reserved."""
    context_window: int | None = Field(None, ge=1)
    """The model's context window in tokens (prompt and reply together), when the table of
    known models does not have it (window.py). When known, no request asks for more output
    than fits, and an agent's conversation is compacted before it fills the window."""
    compact_at: float | None = Field(None, gt=0, le=1)
    """The share of the context window past which an agent's conversation is compacted
    (0.8 when not given)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Fields added to every request body as they are: `seed`, `top_p`, `metadata`, ..."""

    def output_tokens(self, reserved: int) -> int:
        """The output cap to send: what the agent reserved, lowered to `max_output_tokens`."""
        return min(reserved, self.max_output_tokens or reserved)

    def sampling(self) -> dict[str, Any]:
        """The sampling fields every body carries when they are set."""
        return {} if self.temperature is None else {"temperature": self.temperature}


class OpenAIOptions(WireOptions):
    """How to speak Chat Completions to one server. Each can be passed to `resolve_model`."""

    include_usage: bool = True
    """Ask for the usage chunk at the end of a stream (`stream_options.include_usage`)."""
    max_tokens_field: str = "max_tokens"
    """The request field that caps the output: `max_tokens`, or `max_completion_tokens`
    (OpenAI's own name, required by its reasoning models)."""
    send_reasoning: bool = False
    """Send earlier turns' reasoning back as `reasoning_content` (some servers want it during
    tool use, others reject it)."""
    output_format: OutputFormat = "json_schema"
    """How a native-mode output schema goes as `response_format`: `json_schema`
    (`{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`: OpenAI, vLLM,
    Ollama, LM Studio, llama.cpp's `llama-server`), or `json_object` (`{"type": "json_object",
    "schema": ...}`: llama-cpp-python's server, which takes no other; `llama-server` takes it
    too). Either way the server turns the schema into a grammar the reply follows."""


class AnthropicOptions(WireOptions):
    """How to speak the Messages API to one server. Each can be passed to `resolve_model`."""

    tool_choice_none: bool = True
    """The server accepts `tool_choice: {"type": "none"}`. When False, a request that must not
    call tools sends no tools, and earlier tool calls and results are written as text."""
    prompt_cache: bool = True
    """Mark requests for Anthropic's prompt cache: `cache_control` breakpoints on the last
    tool, the system prompt and the latest turns (anthropic.py). False sends none."""
    cache_ttl: CacheTTL = "5m"
    """How long a cached prefix lives: `5m` (writes bill 1.25x input) or `1h` (2x)."""


class ConnectionSettings(BaseModel):
    """Where a model server is and how to talk to it. Every field can be passed to
    `resolve_model` as a keyword argument."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    base_url: str
    """The server's base URL, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`."""
    api_key: SecretStr | None = None
    """The API key; None sends no credentials (local servers)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers sent with every request."""
    timeout: float = Field(600.0, gt=0)
    """Seconds the server may stay silent: before a non-streamed reply begins, or between two
    chunks of a streamed one."""
    deadline: float = Field(1800.0, gt=0)
    """Seconds one whole call may take, retries and waits included: a server that trickles a
    byte at a time, or a stream that never ends, fails the call here."""
    max_reply_bytes: int = Field(32_000_000, ge=1)
    """The largest reply read, in bytes; a bigger one fails the call."""
    connect_timeout: float = Field(10.0, gt=0)
    """Seconds to wait for a connection to open."""
    max_concurrency: int = Field(8, ge=1)
    """Most calls in flight at once to this endpoint, across every agent of the process."""
    max_retries: int = Field(3, ge=0)
    """Retries after a failure that is worth retrying (429, 5xx, 529, connection errors)."""
    backoff_base: float = Field(0.5, ge=0)
    """Seconds before the first retry when the server asks for no particular wait; doubles
    with each retry."""
    backoff_cap: float = Field(8.0, ge=0)
    """The longest backoff between two attempts, in seconds."""
    max_retry_after: float = Field(120.0, ge=0)
    """The longest `Retry-After` honoured, in seconds; a server asking for more is not retried."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return http_url(value)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries,
            backoff_base=self.backoff_base,
            backoff_cap=self.backoff_cap,
            max_retry_after=self.max_retry_after,
        )


def http_url(value: str) -> str:
    """A base URL, checked to be http(s) and without a trailing slash."""
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must start with http:// or https://, got {value!r}")
    return value.rstrip("/")


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait between attempts.

    `max_retries` counts retries, so a call makes at most `max_retries + 1` attempts. The
    backoff before retry n (1-based) is `min(backoff_base * 2**(n-1), backoff_cap)`, less up
    to 25% jitter. A server that asks for a longer wait than `max_retry_after` seconds is not
    retried at all: waiting that long inside one agent step is worse than failing clearly.
    """

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    max_retry_after: float = 120.0

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based) when the server named none."""
        delay = min(self.backoff_base * 2.0 ** (retry - 1), self.backoff_cap)
        return delay * (1 - JITTER * random.random())


Wire = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Preset:
    """One provider: its wire format, default base URL, environment variables and key rules.

    `key_env` is read when a key is required, or when the base URL itself came from
    `base_url_env`: a key meant for one server is never sent to a URL given elsewhere.
    """

    wire: Wire
    base_url: str | None
    base_url_env: str
    key_env: str | None
    key_required: bool
    max_tokens_field: str = "max_tokens"
    output_modes: tuple[OutputMode, ...] = ("tool", "prompted")
    """How its models can be asked for a structured answer, the default first (agent/output.py):
    `native` only where the server holds a reply to a JSON Schema."""


PRESETS: dict[str, Preset] = {
    "openai": Preset(
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        key_required=True,
        max_tokens_field="max_completion_tokens",
        output_modes=("native", "tool", "prompted"),
    ),
    "anthropic": Preset(
        "anthropic",
        "https://api.anthropic.com",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        key_required=True,
        # A final-answer tool by default: every Claude model with tools has it; native
        # (`output_config.format`) only on Claude 4.5 models and later.
        output_modes=("tool", "native", "prompted"),
    ),
    "deepseek": Preset(
        "openai",
        "https://api.deepseek.com",
        "DEEPSEEK_BASE_URL",
        "DEEPSEEK_API_KEY",
        key_required=True,
    ),
    "ollama": Preset(
        "openai",
        "http://localhost:11434/v1",
        "OLLAMA_BASE_URL",
        None,
        key_required=False,
        output_modes=("native", "tool", "prompted"),
    ),
    "openai-compatible": Preset(
        "openai",
        None,
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        key_required=False,
        output_modes=("native", "tool", "prompted"),  # vLLM, llama.cpp, LM Studio
    ),
}


class MissingSettingError(ConfigError):
    """A model needs a setting nobody gave: a key or a base URL, and where it could come from.

    The message speaks Python (`pass api_key=...`); `for_files()` says the same for someone
    who writes job specs and runs commands.
    """

    def __init__(self, provider: str, what: str, variable: str | None, *, option: str) -> None:
        self.provider, self.what, self.variable, self.option = provider, what, variable, option
        if option == "api_key_env":
            text = f"{provider}: no {what}: api_key_env names {variable}, which is not set"
        else:
            where = f" or set {variable}" if variable else ""
            text = f"{provider}: no {what}: pass {option}=...{where}"
        super().__init__(text)

    def for_files(self, *, spec: bool = True) -> str:
        """The same problem in the words of a job spec and a shell (`spec`: the command reads
        a job spec, whose folder's `.env` counts; else only this folder's does)."""
        beside = "beside the job spec or in this folder" if spec else "in this folder"
        dotenv = f"in the environment or in a .env file {beside}"
        if self.option == "base_url":
            hint = "give base_url in the model's settings (model: {name: ..., base_url: ...})"
            if self.variable:
                hint += f", or set {self.variable} {dotenv}"
            return f"{self.provider}: no {self.what}: {hint}"
        return f"{self.provider}: no {self.what}: set {self.variable} {dotenv}"


ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
KEY_REFUSED = (
    "a key does not belong in a file that may be shared; name the environment variable that "
    "holds it instead (api_key_env: MY_KEY), set in the environment or in a .env file"
)
_WIRE_OPTIONS: dict[str, type[WireOptions]] = {
    "openai": OpenAIOptions,
    "anthropic": AnthropicOptions,
}
_WIRE_NAMES = {"openai": "Chat Completions", "anthropic": "the Messages API"}


def _option_fields() -> dict[str, Any]:
    """Every option of every preset as an optional field: None means 'not given'."""
    fields: dict[str, Any] = {}
    for source in (ConnectionSettings, OpenAIOptions, AnthropicOptions):
        for name, info in source.model_fields.items():
            if name in fields or name == "api_key":
                continue
            annotation: Any = info.annotation
            if info.metadata:
                annotation = Annotated[annotation, *info.metadata]
            if name == "base_url":
                annotation = Annotated[annotation, AfterValidator(http_url)]
            fields[name] = (annotation | None, Field(None, description=info.description))
    return fields


_OPTIONS = _option_fields()
OPTION_NAMES: tuple[str, ...] = tuple(_OPTIONS)
SCRIPTED_OPTIONS = ("context_window", "compact_at", "max_output_tokens")
"""What a scripted model takes of the settings: the window it plays, to try context fitting
offline."""
if TYPE_CHECKING:
    # What a type checker sees of the generated fields: the two every reference has; the
    # options are read through `options()` and `getattr`.
    class _Fields(BaseModel):
        name: str
        api_key_env: str | None = None
else:
    _Fields = create_model(
        "_Fields",
        __config__=ConfigDict(extra="forbid", frozen=True),
        name=(
            Annotated[str, Field(min_length=1)],
            Field(description="`provider:model` (`openai:gpt-4o-mini`), or an alias (`sonnet`)."),
        ),
        api_key_env=(
            Annotated[str, Field(pattern=ENV_NAME)] | None,
            Field(None, description="The environment variable that holds the API key."),
        ),
        **_OPTIONS,
    )


class ModelSettings(_Fields):
    """A model's name and the options it is resolved with; a plain string is a name alone.

    The fields are `name`, `api_key_env` and every option name in `OPTION_NAMES`.
    """

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"name": data}
        if isinstance(data, Mapping) and "api_key" in data:
            error = PydanticCustomError("key_refused", KEY_REFUSED)
            detail = InitErrorDetails(type=error, loc=("api_key",), input="[REDACTED]")
            raise ValidationError.from_exception_data(cls.__name__, [detail])
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """As a spec is written: the name alone (a string, as `name` is), or the mapping."""
        settings = handler.resolve_ref_schema(handler(core_schema))
        return {"anyOf": [settings["properties"]["name"], settings]}

    @model_validator(mode="after")
    def _options_fit_the_provider(self) -> ModelSettings:
        problems = self.misplaced_options()
        if problems:
            details = [
                InitErrorDetails(
                    type=PydanticCustomError("misplaced_option", message),
                    loc=(option,),
                    input=getattr(self, option),
                )
                for option, message in problems
            ]
            raise ValidationError.from_exception_data(type(self).__name__, details)
        return self

    @property
    def provider(self) -> str | None:
        """The part before the first `:`; None for an alias."""
        provider, sep, _ = self.name.partition(":")
        return provider if sep else None

    @property
    def is_alias(self) -> bool:
        return self.provider is None

    def options(self) -> dict[str, Any]:
        """The options given (the key not included), as `resolve_model` keywords."""
        return self.model_dump(exclude_none=True, exclude={"name", "api_key_env"})

    def misplaced_options(self) -> list[tuple[str, str]]:
        """Options given that the provider does not take, each with the reason."""
        given = [name for name in OPTION_NAMES if getattr(self, name) is not None]
        preset = PRESETS.get(self.provider or "")
        if self.provider == "scripted":  # it plays a model with a window, for trying one
            return [
                (
                    name,
                    "a scripted model takes only context_window, compact_at and max_output_tokens",
                )
                for name in given
                if name not in SCRIPTED_OPTIONS
            ]
        if self.provider == "replay":
            return [(name, "a replay model takes no options") for name in given]
        if preset is None:
            return []  # an alias (checked once expanded) or a provider registered in code
        allowed = {*ConnectionSettings.model_fields, *_WIRE_OPTIONS[preset.wire].model_fields}
        return [
            (
                name,
                f"not an option of {self.provider} models, which speak {_WIRE_NAMES[preset.wire]}",
            )
            for name in given
            if name not in allowed
        ]

    def updated(self, **values: Any) -> ModelSettings:
        """These settings with some fields replaced (validated again)."""
        return ModelSettings.model_validate({**self.model_dump(exclude_none=True), **values})

    def over(self, base: ModelSettings) -> ModelSettings:
        """`base` (an alias's target) with this reference's own options on top."""
        own = self.model_dump(exclude_none=True, exclude={"name"})
        return base.updated(**own)

    def key_from(self, environ: Mapping[str, str]) -> str | None:
        """The key named by `api_key_env`; ConfigError when that variable is not set."""
        if self.api_key_env is None:
            return None
        key = environ.get(self.api_key_env)
        if not key:
            raise MissingSettingError(
                self.provider or self.name, "API key", self.api_key_env, option="api_key_env"
            )
        return key

    def __str__(self) -> str:
        return self.name

    def __repr_args__(self) -> Any:
        return [(k, v) for k, v in super().__repr_args__() if v is not None]
