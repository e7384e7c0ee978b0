"""A handshake-era MCP server that replays a recorded transcript (shared/corpus).

    python tests/legacy_mcp_server.py TRANSCRIPT.jsonl

It knows only what the recording holds: `initialize` (answered with the recorded version),
`tools/list`, and `tools/call` for the tool names recorded (the first recorded result of
each). Anything else, `server/discover` included, is "Method not found", as a server from
before the 2026 protocol answers, so a client must fall back to the `initialize` handshake.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _recorded(path: Path) -> dict[str, Any]:
    requests: dict[Any, dict[str, Any]] = {}
    answers: dict[str, Any] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry["msg"]
        if entry["dir"] == "->" and "id" in message:
            requests[message["id"]] = message
        elif entry["dir"] == "<-" and "result" in message:
            asked = requests.get(message["id"], {})
            key = asked.get("method", "")
            if key == "tools/call":
                key = f"tools/call:{asked['params']['name']}"
            answers.setdefault(key, message["result"])
    return answers


def main() -> None:
    answers = _recorded(Path(sys.argv[1]))
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification
        key = message.get("method", "")
        if key == "tools/call":
            key = f"tools/call:{message['params']['name']}"
        if key in answers:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answers[key]}
        else:
            error = {"code": -32601, "message": "Method not found", "data": message.get("method")}
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
