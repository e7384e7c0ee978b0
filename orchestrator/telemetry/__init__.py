"""OpenTelemetry export of runs: `instrument()`, from then on every run's events also become
spans. An optional part of the package (the `[otel]` extra): it imports the core through the
trace's sink seam (`add_sink`), and the core never imports it.

    from orchestrator.telemetry import instrument

    with instrument(tracer_provider):      # or: handle = instrument(); handle.uninstrument()
        Agent(...).run_sync("...")

`instrument` installs a trace sink (`writer.add_sink`): a process-wide switch, like
OpenTelemetry's own global tracer provider, which every Trace made while it is on picks up
(runs without a trace file get an in-memory Trace). `instrument_otlp` is what `orchestrator run
--otel` uses: OTLP over HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`. Both need the `otel` extra.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..trace.writer import Sink, Trace, add_sink, remove_sink

if TYPE_CHECKING:  # the otel extra may not be installed
    from opentelemetry.trace import TracerProvider

    from .spans import SpanSink

INSTALL_HINT = 'pip install "orchestrator[otel]"'
CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class Instrumentation:
    """One `instrument()` call: the provider spans go to, and the switch to turn it off.

    `uninstrument()` (or leaving the `with` block) stops new Traces from getting spans, and
    shuts the provider down (exporting what is left) when `instrument_otlp` made it.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None,
        *,
        capture_content: bool,
        owns_provider: bool,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.capture_content = capture_content
        self.owns_provider = owns_provider
        self._span_sink = _span_sink_class()

    def sink(self, trace: Trace) -> Sink:
        """A span sink for one trace (the factory `add_sink` is given)."""
        return self._span_sink(
            self.tracer_provider, capture_content=self.capture_content, mask=trace.mask
        )

    def uninstrument(self) -> None:
        remove_sink(self.sink)
        if self.owns_provider and self.tracer_provider is not None:
            # A provider of our own is the SDK's (instrument_otlp): shutting it down exports
            # what is left. The API's provider has no shutdown.
            from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

            if isinstance(self.tracer_provider, SdkTracerProvider):
                self.tracer_provider.shutdown()

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.uninstrument()


def instrument(
    tracer_provider: TracerProvider | None = None, *, capture_content: bool | None = None
) -> Instrumentation:
    """Make every run from now on emit GenAI spans to `tracer_provider`.

    None means OpenTelemetry's global provider. Message content goes on the spans only when
    `capture_content` is true, or, when it is None, when the environment variable
    `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `true`.
    """
    return _install(tracer_provider, capture_content, owns_provider=False)


def instrument_otlp(
    endpoint: str | None = None, *, capture_content: bool | None = None
) -> Instrumentation:
    """`instrument` with a provider of its own that sends spans over OTLP/HTTP.

    The endpoint is `endpoint`, else what the OpenTelemetry environment variables say
    (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`,
    else `http://localhost:4318/v1/traces`). The service is named `orchestrator` unless
    `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` names it.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigError(f"OpenTelemetry export needs the otel extra: {INSTALL_HINT}") from exc
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "orchestrator"}))
    provider = SdkTracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return _install(provider, capture_content, owns_provider=True)


def _install(
    provider: TracerProvider | None, capture_content: bool | None, *, owns_provider: bool
) -> Instrumentation:
    if capture_content is None:
        capture_content = os.environ.get(CONTENT_VARIABLE, "").strip().lower() in ("true", "1")
    instrumentation = Instrumentation(
        provider, capture_content=capture_content, owns_provider=owns_provider
    )
    add_sink(instrumentation.sink)
    return instrumentation


def _span_sink_class() -> type[SpanSink]:
    try:
        from .spans import SpanSink
    except ImportError as exc:
        raise ConfigError(f"OpenTelemetry export needs the otel extra: {INSTALL_HINT}") from exc
    return SpanSink
