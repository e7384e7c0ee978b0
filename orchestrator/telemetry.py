"""OpenTelemetry export of runs: `instrument()` (see orchestrator/trace/telemetry.py).

Needs the `otel` extra: pip install "orchestrator[otel]".
"""

from .trace.telemetry import Instrumentation, instrument, instrument_otlp

__all__ = ["Instrumentation", "instrument", "instrument_otlp"]
