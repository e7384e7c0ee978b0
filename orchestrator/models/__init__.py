"""Models: the ChatModel protocol, its adapters, and `resolve_model`."""

from .base import ChatModel, ForcedTool, ModelRequest, ModelResponse, ToolChoice
from .registry import resolve_model
from .scripted import ScriptedModel

__all__ = [
    "ChatModel",
    "ForcedTool",
    "ModelRequest",
    "ModelResponse",
    "ScriptedModel",
    "ToolChoice",
    "resolve_model",
]
