"""A minimal MCP server over stdio, written by hand (no SDK), for results the official SDK would not send:

- ``reading`` answers with structured content holding a bare NaN, which JSON does not have but Python's and
  pydantic's parsers accept;
- ``stats`` answers with an empty ``content`` list and its result only in ``structuredContent`` (the spec allows
  it: the text copy of structured content is a SHOULD, for older clients);
- ``refuse`` reports an error (``isError``) with no content blocks, the reason only in ``structuredContent``;
- ``silent`` answers with no content and no structured content.
"""

import json
import sys

RESULTS = {
    "reading": '{"content": [{"type": "image", "data": "", "mimeType": "image/png"}], '
    '"structuredContent": {"value": NaN}, "isError": false}',
    "stats": '{"content": [], "structuredContent": {"count": 3, "mean": 1.5, "tags": ["a", "b"]}, "isError": false}',
    "refuse": '{"content": [], "structuredContent": {"code": "quota", "retry_after": 30}, "isError": true}',
    "silent": '{"content": []}',
}
TOOLS = [
    {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object", "properties": {}}}
    for name in RESULTS
]


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
            "serverInfo": {"name": "handwritten", "version": "1"},
        }
        answer(request_id, json.dumps(info))
    elif method == "tools/list":
        answer(request_id, json.dumps({"tools": TOOLS}))
    elif method == "tools/call":
        answer(request_id, RESULTS[message["params"]["name"]])
    else:
        answer(request_id, "{}")
