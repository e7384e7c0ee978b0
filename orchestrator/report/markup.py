"""Small helpers for building HTML as strings: escaping, numbers, times, status colours.

Everything that comes from a trace goes through `esc` (text and attribute values alike), so a
model output such as `</script><img onerror=...>` stays text.
"""

from __future__ import annotations

import html
import math

STATUS_CLASSES = {
    "completed": "ok",
    "error": "bad",
    "failed": "bad",
    "cancelled": "warn",
    "interrupted": "warn",
    "max_steps": "limit",
    "budget_exhausted": "limit",
    "loop_detected": "limit",
    "context_full": "limit",
    "output_invalid": "bad",
    "skipped": "skip",
    "running": "run",
    "unfinished": "run",
    "input_required": "warn",
}


def esc(value: object) -> str:
    """Text or an attribute value, escaped (quotes included)."""
    return html.escape(str(value), quote=True)


def status_class(status: str | None) -> str:
    return STATUS_CLASSES.get(status or "", "skip")


def pill(status: str | None) -> str:
    """A coloured status label."""
    label = (status or "not started").replace("_", " ")
    return f'<span class="pill {status_class(status)}">{esc(label)}</span>'


def tokens(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def cost(value: float | None) -> str:
    if value is None:
        return ""
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def seconds(value: float | None) -> str:
    """A duration people read at a glance: 0.4 ms, 12 ms, 3.2 s, 4 min 05 s."""
    if value is None:
        return ""
    if value < 0.001:
        return f"{value * 1000:.2f} ms"
    if value < 1:
        return f"{value * 1000:.0f} ms" if value >= 0.01 else f"{value * 1000:.1f} ms"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s"


def nice_step(span: float, count: int = 8) -> float:
    """A round tick interval (1, 2 or 5 times a power of ten) giving about `count` ticks."""
    if span <= 0:
        return 1.0
    raw = span / count
    power: float = 10 ** math.floor(math.log10(raw))  # an int for spans of 10 and more
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def shorten(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"
