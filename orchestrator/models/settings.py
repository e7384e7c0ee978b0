"""`ModelSettings`: a model and its options, as job specs, sub-agents and alias tables write them.

    model: openai-compatible:qwen3                 # a name alone
    model: {name: openai-compatible:qwen3, base_url: http://127.0.0.1:8080/v1, stream: false,
            timeout: 120, max_output_tokens: 2048, temperature: 0, api_key_env: MY_KEY}

Every key besides `name` and `api_key_env` is an option of `resolve_model`: the fields of
`ConnectionSettings` and of the wire options (`OpenAIOptions`, `AnthropicOptions`), generated
from them so the two never drift apart. A key itself (`api_key`) is refused: a file may be
shared or committed, so it names the environment variable that holds the key instead. A name
without a `:` is an alias (`sonnet`, or one of the user's), expanded by `ModelAliases`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from .anthropic import AnthropicOptions
from .http import ConnectionSettings, http_url
from .openai import OpenAIOptions
from .providers import PRESETS, MissingSettingError

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
KEY_REFUSED = (
    "a key does not belong in a file that may be shared; name the environment variable that "
    "holds it instead (api_key_env: MY_KEY), set in the environment or in a .env file"
)
_WIRE_OPTIONS = {"openai": OpenAIOptions, "anthropic": AnthropicOptions}
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
_Fields: type[BaseModel] = create_model(
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
        if self.provider in ("scripted", "replay"):
            return [(name, f"a {self.provider} model takes no options") for name in given]
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
