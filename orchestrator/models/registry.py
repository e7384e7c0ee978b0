"""`resolve_model("provider:model")`: a model string (or settings, or an alias) to a ChatModel."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from .aliases import ModelAliases, ModelRef
from .base import ChatModel
from .providers import PRESETS, PresetFactory
from .replay import ReplayModel
from .scripted import ScriptedModel
from .settings import ModelSettings

ModelFactory = Callable[..., ChatModel]


def _scripted(target: str, **options: Any) -> ChatModel:
    return ScriptedModel(target, **options)


def _replay(target: str, **options: Any) -> ChatModel:
    return ReplayModel(target, **options)


PROVIDERS: dict[str, ModelFactory] = {
    "scripted": _scripted,
    "replay": _replay,
    **{name: PresetFactory(name) for name in PRESETS},
}


def resolve_model(
    model: ModelRef | ChatModel,
    *,
    aliases: ModelAliases | None = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> ChatModel:
    """Turn `provider:model`, an alias or `ModelSettings` into a model; a ChatModel passes
    through unchanged.

    `scripted:PATH` replays the script at PATH; `replay:TRACE` answers with the responses
    recorded in a trace (models/replay.py). `openai:`, `anthropic:`, `deepseek:`,
    `ollama:` and `openai-compatible:` reach real servers (see docs/models.md); `options`
    are their connection settings (`base_url`, `api_key`, `timeout`, `max_retries`, ...) and
    wire options (`stream`, `extra_body`, ...), over those of the settings. A name without a
    `:` is an alias (`sonnet`; see `ModelAliases`, by default the built-in ones and the
    user's file). Base URLs and keys not given come from `environ` (default: the process
    environment), as does the key that settings name with `api_key_env`.
    """
    if not isinstance(model, str | ModelSettings):
        return model
    settings = ModelSettings.model_validate(model)
    if settings.is_alias:
        settings = (aliases or ModelAliases.standard(environ=environ)).expand(settings)
    elif not settings.name.partition(":")[2]:
        raise ConfigError(
            f"model {settings.name!r} must look like 'provider:model'; "
            f"providers: {', '.join(PROVIDERS)}"
        )
    key = settings.key_from(os.environ if environ is None else environ)
    given = {**settings.options(), **({"api_key": key} if key else {}), **options}
    provider, _, target = settings.name.partition(":")
    factory = PROVIDERS.get(provider)
    if factory is None:
        raise ConfigError(unknown_provider(provider))
    if isinstance(factory, PresetFactory):
        return factory(target, environ=environ, **given)
    return factory(target, **given)


def check_model(model: ModelRef, aliases: ModelAliases | None = None) -> ModelSettings:
    """The settings `model` stands for, or the ConfigError that resolving it would raise for
    its name alone (an unknown alias or provider, a name without `provider:`); nothing is
    built and no key is needed."""
    settings = ModelSettings.model_validate(model)
    if settings.is_alias:
        settings = (aliases or ModelAliases.standard()).expand(settings)
    provider, _, target = settings.name.partition(":")
    if not target:
        raise ConfigError(
            f"model {settings.name!r} must look like 'provider:model'; "
            f"providers: {', '.join(PROVIDERS)}"
        )
    if provider not in PROVIDERS:
        raise ConfigError(unknown_provider(provider))
    return settings


def unknown_provider(provider: str) -> str:
    close = difflib.get_close_matches(provider, PROVIDERS, n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"unknown model provider {provider!r}{hint}; known: {', '.join(PROVIDERS)}"
