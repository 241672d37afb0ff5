"""What the CLI tests share: ``stopwise_cmd`` (the command as a real process) and an agent file they load with
FILE.py:NAME: a refund that needs approval (and logs its effect to
``effects.log`` in the working directory), and a pager cut off by ``max_steps=2`` that finishes on its third
look. Both models answer from the history alone, so every process that loads the file sees the same agent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

AGENTS = '''
from stopwise import Agent, FunctionModel, Reply, ToolCall, tool
from stopwise.messages import Role


@tool(needs_approval=True)
def issue_refund(order: str, amount_eur: int) -> str:
    """Refund an order.

    Args:
        order: The order id.
        amount_eur: The amount, in euros.
    """
    with open("effects.log", "a") as f:
        f.write(f"refund {order} {amount_eur}\\n")
    return f"refunded {amount_eur} EUR on {order}"


@tool
def lookup(page: int) -> str:
    """Read a page.

    Args:
        page: The page number.
    """
    return f"page {page}"


def _refund(request):
    results = [m for m in request.messages if m.role is Role.TOOL]
    if not results:
        return Reply(tool_calls=(ToolCall("issue_refund", {"order": "A-1", "amount_eur": 5}, id="refund-1"),))
    return "Done: " + results[-1].content


def _pager(request):
    seen = sum(1 for m in request.messages if m.role is Role.TOOL)
    if seen >= 3:
        return "Read three pages. \\x1b[31m[bold]red[/bold]"
    return Reply(tool_calls=(ToolCall("lookup", {"page": seen + 1}),))


refunder = Agent(name="refunder", model=FunctionModel(_refund), tools=(issue_refund,))
pager = Agent(name="pager", model=FunctionModel(_pager), tools=(lookup,), max_steps=2)
'''


def stopwise_cmd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m stopwise ARGS`` in ``cwd``, no stdin, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "stopwise", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
