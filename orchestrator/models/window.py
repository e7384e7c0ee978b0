"""A model's context window: where it is known from, and what a provider's refusal tells of it.

The window is the most tokens one request may hold, prompt and reply together. It is known
from, in order:

1. the model's `context_window` setting (a job spec's `model: {name: ..., context_window:
   8192}`, `--model-option context_window=8192`, or `context_window=` in Python; a model
   object of one's own may carry a `context_window` attribute);
2. the table below of models whose window their provider publishes (`KNOWN_WINDOWS`);
3. the server, where it says so: a local server (`openai-compatible:`) is asked once per
   model, before an agent's first request: vLLM's `/v1/models` (`max_model_len`), llama.cpp's
   `/props` (`n_ctx`) (`OpenAIChatModel.server_window`). Ollama is not asked: the window it
   reports is the model's, not the smaller one it runs with;
4. a provider's refusal of a request that was too long (`context_refusal`): most name the
   window in their error text, and the loop learns it from there.

Unknown means unknown: no window is guessed, and an agent then sends what it sends until a
provider refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .base import ChatModel, options_of

WINDOWS_CHECKED = "2026-11"
KNOWN_WINDOWS: dict[str, dict[str, int]] = {
    # provider -> model name prefix -> window in tokens; the longest matching prefix wins.
    "openai": {
        "gpt-4o": 128_000,
        "gpt-4.1": 1_047_576,
        "gpt-5": 400_000,
        "o3": 200_000,
        "o4-mini": 200_000,
    },
    "anthropic": {"claude-": 200_000},
    "deepseek": {"deepseek-chat": 128_000, "deepseek-reasoner": 128_000},
}
CONTEXT_CODES = ("context_length_exceeded", "exceed_context_size_error")
_WINDOW_PATTERNS = (
    # OpenAI, vLLM, llama-cpp-python: "This model's maximum context length is 8192 tokens."
    re.compile(r"maximum context length is (\d[\d,]*) tokens", re.IGNORECASE),
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    re.compile(r"tokens? > (\d[\d,]*) maximum", re.IGNORECASE),
    # llama-cpp-python's own: "Requested tokens (9000) exceed context window of 8192"
    re.compile(r"exceed context window of (\d[\d,]*)", re.IGNORECASE),
)
_PROMPT_PATTERNS = (
    re.compile(r"\((\d[\d,]*) in the messages", re.IGNORECASE),
    re.compile(r"your messages resulted in (\d[\d,]*) tokens", re.IGNORECASE),
    re.compile(r"your request has (\d[\d,]*) input tokens", re.IGNORECASE),
    re.compile(r"prompt is too long: (\d[\d,]*) tokens", re.IGNORECASE),
    re.compile(r"Requested tokens \((\d[\d,]*)\)", re.IGNORECASE),
)


@dataclass(frozen=True)
class KnownWindow:
    """A context window and where it was learned: `setting`, `known model`, `server` or
    `refusal`."""

    tokens: int
    source: str


def context_window(model: ChatModel) -> KnownWindow | None:
    """The model's context window from its settings or the table of known models; None when
    neither knows it."""
    setting = options_of(model).context_window
    if setting is not None:
        return KnownWindow(setting, "setting")
    known = known_window(model.name)
    return KnownWindow(known, "known model") if known is not None else None


def compaction_threshold(model: ChatModel) -> float | None:
    """The `compact_at` a model was configured with, if any."""
    return options_of(model).compact_at


def known_window(name: str) -> int | None:
    """The published window of `provider:model`, if the table has it."""
    provider, _, model = name.partition(":")
    prefixes = KNOWN_WINDOWS.get(provider, {})
    matches = [prefix for prefix in prefixes if model.startswith(prefix)]
    return prefixes[max(matches, key=len)] if matches else None


def models_window(listing: Any, model: str) -> int | None:
    """vLLM's `/v1/models`: the `max_model_len` of the entry for `model` (or of the only
    entry, when the server serves one model under another name)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    return _positive(named[0].get("max_model_len")) if named else None


def props_window(props: Any) -> int | None:
    """llama.cpp's `/props`: `default_generation_settings.n_ctx` (or `n_ctx` at the top)."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    found = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _positive(found) or _positive(props.get("n_ctx"))


@dataclass(frozen=True)
class ContextRefusal:
    """What a provider's refusal of a too-long request says: the window and the prompt's
    size in the provider's own tokens, each when it says so."""

    window: int | None
    prompt_tokens: int | None


def context_refusal(message: str, code: str | None, body: Any = None) -> ContextRefusal | None:
    """Read a provider's error as a refusal for length; None when it is some other error.

    `body` is the error's JSON, where llama.cpp's server puts `n_ctx` and `n_prompt_tokens`.
    """
    window = _first_number(_WINDOW_PATTERNS, message)
    if code not in CONTEXT_CODES and window is None:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        window = window or _positive(error.get("n_ctx"))
        prompt = _positive(error.get("n_prompt_tokens"))
    else:
        prompt = None
    return ContextRefusal(window, prompt or _first_number(_PROMPT_PATTERNS, message))


def _first_number(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1).replace(",", ""))
    return None


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
