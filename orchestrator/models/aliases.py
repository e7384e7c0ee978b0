"""Deprecated: model aliases moved to `orchestrator.models.resolve` (import them from
`orchestrator.models`). This module re-exports them for one release."""

import warnings

from .resolve import (
    BUILTIN_ALIASES,
    DEFAULT_ALIAS,
    INHERIT,
    ModelAliases,
    ModelRef,
    parse_aliases,
    read_alias_file,
    user_alias_file,
)

warnings.warn(
    "orchestrator.models.aliases is deprecated; import from orchestrator.models "
    "(the aliases now live in orchestrator.models.resolve)",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "BUILTIN_ALIASES",
    "DEFAULT_ALIAS",
    "INHERIT",
    "ModelAliases",
    "ModelRef",
    "parse_aliases",
    "read_alias_file",
    "user_alias_file",
]
