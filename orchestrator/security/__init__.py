"""What a run may do, and keeping it to that: permissions, path confinement, secrets."""

from .permissions import Permissions, SandboxSettings, SandboxUnavailable
from .secrets import (
    MASK,
    SecretMask,
    is_secret_name,
    mask_url_credentials,
    secrets_from_environment,
)
from .workspace import (
    LockedFile,
    PathRefused,
    is_inside,
    is_temporary,
    locked_file,
    open_inside,
    open_resolved,
    relative_name,
    resolve_inside,
    write_resolved,
)

__all__ = [
    "MASK",
    "LockedFile",
    "PathRefused",
    "Permissions",
    "SandboxSettings",
    "SandboxUnavailable",
    "SecretMask",
    "is_inside",
    "is_secret_name",
    "is_temporary",
    "locked_file",
    "mask_url_credentials",
    "open_inside",
    "open_resolved",
    "relative_name",
    "resolve_inside",
    "secrets_from_environment",
    "write_resolved",
]
