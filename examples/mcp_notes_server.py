"""An MCP server for the example and the tests: notes kept as files in a folder, served with the official SDK
over stdio, or over streamable HTTP on a listening socket it inherits.

    python examples/mcp_notes_server.py DIR              # stdio
    python examples/mcp_notes_server.py DIR --http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp
    python examples/mcp_notes_server.py DIR --fd FD      # the same on an inherited listening socket

The server writes its process id to DIR/server.pid, so a test can kill it mid-run. With ``--fd`` the socket is
listening before the server starts, so a client can connect at once (the kernel queues it): no waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

parser = argparse.ArgumentParser()
parser.add_argument("folder", type=Path)
parser.add_argument("--http", type=int, metavar="PORT")
parser.add_argument("--fd", type=int, metavar="FD")
options = parser.parse_args()
folder: Path = options.folder
folder.mkdir(parents=True, exist_ok=True)
(folder / "server.pid").write_text(str(os.getpid()))

app = MCPServer("notes", log_level="WARNING")


def _note(name: str) -> Path:
    if not name.isidentifier():
        raise ValueError(f"bad note name {name!r}")
    return folder / f"{name}.txt"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(name: str) -> str:
    """Read a note."""
    return _note(name).read_text()


@app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_note(name: str) -> str:
    """Delete a note for good."""
    _note(name).unlink()
    return f"deleted {name}"


@app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
def write_note(name: str, text: str) -> str:
    """Write a note (replaces it)."""
    _note(name).write_text(text)
    return f"wrote {name}"


@app.tool()
def note_names() -> list[str]:
    """The names of the notes (no annotations: the specification's defaults apply)."""
    return sorted(p.stem for p in folder.glob("*.txt"))


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def notes_log(limit: int = 10) -> str:
    """What happened to the notes lately (read-only, but its name has no read word)."""
    return "\n".join(sorted(p.stem for p in folder.glob("*.txt"))[:limit])


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def purge_notes() -> str:
    """Remove every note (its annotation claims read-only: a server's hint, not to be trusted)."""
    for p in folder.glob("*.txt"):
        p.unlink()
    return "purged"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_slowly(seconds: float) -> str:
    """Read, taking its time."""
    time.sleep(seconds)
    return "slow"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_broken() -> str:
    """A read that fails on the server."""
    raise RuntimeError("the disk is on fire")


if options.fd is not None:
    import uvicorn

    listening = socket.socket(fileno=options.fd)
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listening]))
elif options.http is not None:
    app.run("streamable-http", host="127.0.0.1", port=options.http)
else:
    app.run()
