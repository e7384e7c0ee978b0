"""Running blocking code (a sync tool, a skill's import) where it cannot hold up a run.

Each call runs in a daemon thread of its own. Its caller can stop waiting (a timeout, a
cancelled run) and go on at once: nothing joins the thread, not `asyncio.run` at its end, not the
interpreter at exit. A thread cannot be killed, so code that never returns keeps its thread
until the process ends; the run it was part of has long moved on by then.

Whatever the code raises is handed to the caller, `SystemExit` and `KeyboardInterrupt`
included, so a tool that calls `sys.exit()` fails that call and nothing else.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class CallTimedOut(TimeoutError):
    """The code did not finish within its time; its thread was left behind."""


async def run_in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Await `fn(*args, **kwargs)` run in a daemon thread; cancelling stops only the wait."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(value: Any, error: BaseException | None) -> None:
        if future.done():
            return  # the caller stopped waiting
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller, whatever it is
            _call_soon(loop, deliver, None, _as_error(exc))
        else:
            _call_soon(loop, deliver, value, None)

    threading.Thread(target=work, name=f"tool:{_name(fn)}", daemon=True).start()
    return await future


def call_with_timeout(fn: Callable[[], T], timeout: float | None, *, what: str) -> T:
    """`fn()` in a daemon thread, waited for at most `timeout` seconds (None: for ever).

    Raises `CallTimedOut` naming `what` when it does not finish in time.
    """
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = _as_error(exc)

    thread = threading.Thread(target=work, name=f"call:{what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise CallTimedOut(f"{what} did not finish within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class ExitFromCode(Exception):
    """Code called `sys.exit()` or raised `KeyboardInterrupt` where it should not."""


def _as_error(exc: BaseException) -> BaseException:
    """`SystemExit` and `KeyboardInterrupt` from called code become an ordinary error: they
    must not end the process or look like the user's Ctrl-C."""
    if isinstance(exc, SystemExit | KeyboardInterrupt):
        detail = f" ({exc})" if str(exc) else ""
        error = ExitFromCode(f"{type(exc).__name__}{detail}")
        error.__cause__ = exc
        return error
    return exc


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass  # the loop has closed: nobody waits for this result any more


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)
