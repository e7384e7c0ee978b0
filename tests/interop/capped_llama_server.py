"""llama-cpp-python's OpenAI-compatible server, with one of its bugs worked around.

In its `chatml-function-calling` chat format (llama-cpp-python 0.3.16), the completions that
write a tool call are made with `max_tokens=None`, whatever the request asked for. A greedy
small model that starts an argument string can then write until the context is full: minutes
for one request, and whether it happens depends on the build's arithmetic (the CPU it was
compiled for). Here every completion made without a limit gets one (`CAP` tokens), so a
request ends in seconds as the wire format promises; everything else is the real server.
Started as `python capped_llama_server.py ARGS...`, with the arguments of
`python -m llama_cpp.server`.
"""

from __future__ import annotations

import runpy
from typing import Any

import llama_cpp

CAP = 256
_create_completion = llama_cpp.Llama.create_completion


def _capped(self: llama_cpp.Llama, *args: Any, **kwargs: Any) -> Any:
    if kwargs.get("max_tokens") is None:
        kwargs["max_tokens"] = CAP
    return _create_completion(self, *args, **kwargs)


llama_cpp.Llama.create_completion = _capped  # type: ignore[method-assign]

if __name__ == "__main__":
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
