"""Keep benchmark processes off the network: telemetry off, and every outside connection refused.

Peers are driven by fake models, so nothing should ever connect; this makes sure of it (a
framework that tried would fail loudly instead of timing a network round trip).
"""

from __future__ import annotations

import os

from orchestrator.testing import block_outside_connections

QUIET = {
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "OTEL_SDK_DISABLED": "true",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
}


def block_network() -> None:
    """Set the peers' telemetry switches off and refuse connections that are not local."""
    for name, value in QUIET.items():
        os.environ.setdefault(name, value)
    block_outside_connections("benchmark processes")
