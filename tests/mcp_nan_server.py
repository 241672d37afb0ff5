"""A minimal MCP server over stdio, written by hand (no SDK): its one tool answers with structured content that
holds a bare NaN, which JSON does not have but Python's and pydantic's parsers accept."""

import json
import sys

TOOL = {"name": "reading", "description": "A sensor reading.", "inputSchema": {"type": "object", "properties": {}}}
NAN_RESULT = (
    '{"content": [{"type": "image", "data": "", "mimeType": "image/png"}], "structuredContent": {"value": NaN}, '
    '"isError": false}'
)


def answer(request_id: object, result: str) -> None:
    sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "result": {result}}}\n')
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # a notification
    if method == "initialize":
        version = message["params"]["protocolVersion"]
        info = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "nan", "version": "1"},
        }
        answer(request_id, json.dumps(info))
    elif method == "tools/list":
        answer(request_id, json.dumps({"tools": [TOOL]}))
    elif method == "tools/call":
        answer(request_id, NAN_RESULT)
    else:
        answer(request_id, "{}")
