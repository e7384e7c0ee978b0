"""What a run may do, and keeping it to that: permissions, path confinement, secrets."""

from .permissions import Permissions
from .secrets import (
    MASK,
    SecretMask,
    is_secret_name,
    mask_url_credentials,
    secrets_from_environment,
)
from .workspace import (
    PathRefused,
    is_inside,
    open_inside,
    open_resolved,
    relative_name,
    resolve_inside,
)

__all__ = [
    "MASK",
    "PathRefused",
    "Permissions",
    "SecretMask",
    "is_inside",
    "is_secret_name",
    "mask_url_credentials",
    "open_inside",
    "open_resolved",
    "relative_name",
    "resolve_inside",
    "secrets_from_environment",
]
