"""Provider presets: `openai:`, `anthropic:`, `deepseek:`, `ollama:`, `openai-compatible:`.

A preset names a wire format, a default base URL and where the environment keeps the base URL
and the key. Arguments win over the environment, the environment over the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from .anthropic import AnthropicModel, AnthropicOptions
from .base import ChatModel
from .http import Connection, ConnectionSettings
from .openai import OpenAIChatModel, OpenAIOptions

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


PRESETS: dict[str, Preset] = {
    "openai": Preset(
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        key_required=True,
        max_tokens_field="max_completion_tokens",
    ),
    "anthropic": Preset(
        "anthropic",
        "https://api.anthropic.com",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        key_required=True,
    ),
    "deepseek": Preset(
        "openai",
        "https://api.deepseek.com",
        "DEEPSEEK_BASE_URL",
        "DEEPSEEK_API_KEY",
        key_required=True,
    ),
    "ollama": Preset(
        "openai", "http://localhost:11434/v1", "OLLAMA_BASE_URL", None, key_required=False
    ),
    "openai-compatible": Preset(
        "openai", None, "OPENAI_BASE_URL", "OPENAI_API_KEY", key_required=False
    ),
}

M = TypeVar("M", bound=BaseModel)


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

    def for_files(self) -> str:
        """The same problem in the words of a job spec and a shell."""
        dotenv = "in the environment or in a .env file beside the job spec or in this folder"
        if self.option == "base_url":
            hint = "give base_url in the model's settings (model: {name: ..., base_url: ...})"
            if self.variable:
                hint += f", or set {self.variable} {dotenv}"
            return f"{self.provider}: no {self.what}: {hint}"
        return f"{self.provider}: no {self.what}: set {self.variable} {dotenv}"


def build_model(
    provider: str,
    model: str,
    options: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> ChatModel:
    """A ready model for `provider:model`; `options` mixes wire options and connection settings.

    Base URLs and keys not given come from `environ` (the process environment by default).
    """
    preset = PRESETS[provider]
    wire_fields = (OpenAIOptions if preset.wire == "openai" else AnthropicOptions).model_fields
    wire = {k: v for k, v in options.items() if k in wire_fields}
    rest = {k: v for k, v in options.items() if k not in wire}
    settings = _settings(provider, preset, rest, os.environ if environ is None else environ)
    if preset.wire == "anthropic":
        connection = Connection(provider, settings, auth="x-api-key")
        return AnthropicModel(model, connection, _validated(provider, AnthropicOptions, wire))
    wire.setdefault("max_tokens_field", preset.max_tokens_field)
    chat_options = _validated(provider, OpenAIOptions, wire)
    return OpenAIChatModel(model, Connection(provider, settings), chat_options)


class PresetFactory:
    """The `resolve_model` factory of one preset; it also takes the environment to read."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def __call__(
        self, target: str, *, environ: Mapping[str, str] | None = None, **options: Any
    ) -> ChatModel:
        return build_model(self.provider, target, options, environ)

    def __repr__(self) -> str:
        return f"PresetFactory({self.provider!r})"


def _settings(
    provider: str, preset: Preset, options: dict[str, Any], environ: Mapping[str, str]
) -> ConnectionSettings:
    base_url = options.pop("base_url", None)
    base_url_from_env = False
    if base_url is None and environ.get(preset.base_url_env):
        base_url, base_url_from_env = environ[preset.base_url_env], True
    base_url = base_url or preset.base_url
    if not base_url:
        raise MissingSettingError(provider, "base URL", preset.base_url_env, option="base_url")
    api_key = options.pop("api_key", None)
    if api_key is None and preset.key_env and (preset.key_required or base_url_from_env):
        api_key = environ.get(preset.key_env) or None
    if api_key is None and preset.key_required:
        raise MissingSettingError(provider, "API key", preset.key_env, option="api_key")
    if api_key is not None and not isinstance(api_key, str):
        raise ConfigError(f"{provider}: api_key must be a string")
    values = {"base_url": base_url, "api_key": api_key, **options}
    return _validated(provider, ConnectionSettings, values)


def _validated(provider: str, model_type: type[M], values: Mapping[str, Any]) -> M:
    try:
        return model_type.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'options'}: "
            + ("unknown option" if error["type"] == "extra_forbidden" else error["msg"])
            for error in exc.errors(include_url=False)
        )
        raise ConfigError(f"{provider}: invalid model options: {problems}") from None
