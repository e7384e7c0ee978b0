"""`resolve_model("provider:model")`: a model string to a ready ChatModel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .base import ChatModel
from .providers import PRESETS, preset_factory
from .replay import ReplayModel
from .scripted import ScriptedModel

ModelFactory = Callable[..., ChatModel]


def _scripted(target: str, **options: Any) -> ChatModel:
    return ScriptedModel(target, **options)


def _replay(target: str, **options: Any) -> ChatModel:
    return ReplayModel(target, **options)


PROVIDERS: dict[str, ModelFactory] = {
    "scripted": _scripted,
    "replay": _replay,
    **{name: preset_factory(name) for name in PRESETS},
}


def resolve_model(model: str | ChatModel, **options: Any) -> ChatModel:
    """Turn `provider:model` into a model; a ChatModel passes through unchanged.

    `scripted:PATH` replays the script at PATH; `replay:TRACE` answers with the responses
    recorded in a trace (models/replay.py). `openai:`, `anthropic:`, `deepseek:`,
    `ollama:` and `openai-compatible:` reach real servers (see docs/models.md); `options`
    are their connection settings (`base_url`, `api_key`, `timeout`, `max_retries`, ...) and
    wire options (`stream`, `extra_body`, ...).
    """
    if not isinstance(model, str):
        return model
    provider, sep, target = model.partition(":")
    if not sep or not target:
        raise ConfigError(
            f"model {model!r} must look like 'provider:model'; providers: {', '.join(PROVIDERS)}"
        )
    factory = PROVIDERS.get(provider)
    if factory is None:
        raise ConfigError(f"unknown model provider {provider!r}; known: {', '.join(PROVIDERS)}")
    return factory(target, **options)
