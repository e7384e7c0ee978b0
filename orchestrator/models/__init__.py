"""Models: the ChatModel protocol, its adapters, and `resolve_model`.

The room, by concept: `base.py` the interface (and `TextTap`); `settings.py` what a model is
resolved with; `resolve.py` aliases, providers and `resolve_model`; `scripted.py`,
`function.py` and `replay.py` the offline models; `prices.py` what calls cost; `window.py` a
model's context window; the HTTP adapters: `adapter.py` (streamed or whole, and the
fallback), the wire formats `openai.py` and `anthropic.py`, and the connection `http.py`.
The HTTP names below are loaded on first use, so importing this package and running a
scripted model never loads httpx; the function model's are loaded on first use too.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from ..errors import FunctionReplyError, ScriptExhausted
from .base import (
    ChatModel,
    ForcedTool,
    Model,
    ModelRequest,
    ModelResponse,
    ModelWrapper,
    OutputMode,
    OutputSchema,
    PricedModel,
    TextSink,
    TextTap,
    ToolChoice,
    options_of,
    output_cap,
    output_modes_of,
    price_of,
    priced_by,
    unsupported_mode,
    unwrap,
)
from .prices import Price
from .resolve import (
    BUILTIN_ALIASES,
    DEFAULT_ALIAS,
    INHERIT,
    PROVIDERS,
    ModelAliases,
    ModelRef,
    ResolvedModels,
    check_model,
    output_modes_for,
    resolve_model,
    user_alias_file,
)
from .scripted import ScriptedModel
from .settings import (
    OPTION_NAMES,
    PRESETS,
    AnthropicOptions,
    ConnectionSettings,
    MissingSettingError,
    ModelSettings,
    OpenAIOptions,
    RetryPolicy,
    WireOptions,
)
from .window import KnownWindow, context_refusal, context_window, known_window

if TYPE_CHECKING:
    from .adapter import UnusableStreamError
    from .anthropic import AnthropicModel
    from .function import AgentInfo, FunctionModel, ModelFunction, Reply, tool_call
    from .http import Connection, close_connections
    from .openai import OpenAIChatModel
    from .replay import ReplayMismatch, ReplayModel

_ON_FIRST_USE = {
    "AgentInfo": ".function",
    "FunctionModel": ".function",
    "ModelFunction": ".function",
    "Reply": ".function",
    "tool_call": ".function",
    "ReplayMismatch": ".replay",
    "ReplayModel": ".replay",
    "AnthropicModel": ".anthropic",
    "Connection": ".http",
    "OpenAIChatModel": ".openai",
    "UnusableStreamError": ".adapter",
    "close_connections": ".http",
}


def __getattr__(name: str) -> object:
    """The HTTP adapters', the replay model's and the function model's names, imported when
    first asked for."""
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "AgentInfo",
    "FunctionModel",
    "FunctionReplyError",
    "ModelFunction",
    "Reply",
    "tool_call",
    "BUILTIN_ALIASES",
    "DEFAULT_ALIAS",
    "INHERIT",
    "OPTION_NAMES",
    "PRESETS",
    "PROVIDERS",
    "AnthropicModel",
    "AnthropicOptions",
    "ChatModel",
    "Connection",
    "ConnectionSettings",
    "ForcedTool",
    "KnownWindow",
    "MissingSettingError",
    "ModelAliases",
    "ModelRef",
    "Model",
    "ModelRequest",
    "ModelWrapper",
    "Price",
    "PricedModel",
    "ModelResponse",
    "ModelSettings",
    "OpenAIChatModel",
    "OpenAIOptions",
    "OutputMode",
    "OutputSchema",
    "ReplayMismatch",
    "ReplayModel",
    "ResolvedModels",
    "RetryPolicy",
    "ScriptExhausted",
    "ScriptedModel",
    "TextSink",
    "TextTap",
    "ToolChoice",
    "UnusableStreamError",
    "WireOptions",
    "close_connections",
    "options_of",
    "output_cap",
    "output_modes_of",
    "price_of",
    "priced_by",
    "unsupported_mode",
    "unwrap",
    "check_model",
    "output_modes_for",
    "context_refusal",
    "context_window",
    "known_window",
    "resolve_model",
    "user_alias_file",
]
