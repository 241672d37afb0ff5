"""``stopwise show RUN``: one run's transcript with its decision timeline, for a terminal or (``--json``) a
program; and ``stopwise report RUN -o FILE``: the same run as one self-contained HTML page."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from stopwise._cli._common import existing_db, find_run, output_file, reading_store, settle_command
from stopwise._terminal import json_safe, terminal_safe
from stopwise._view.timeline import UNCOMMITTED_WHY, RunView, StepView, readings, run_view

__all__ = ["load_view", "render_text", "report", "show"]

_COLLAPSED = 160
"""How much of a tool's arguments or result ``show`` prints on one line (``--full`` prints all)."""


async def load_view(path: Path, ref: str) -> RunView:
    store = reading_store(path)
    try:
        snapshot, run = await find_run(store, ref)
        return run_view(snapshot, run)
    finally:
        await store.close()


def show(db: str, ref: str, *, as_json: bool, full: bool) -> int:
    path = existing_db(db, reading=True)
    view = asyncio.run(load_view(path, ref))
    if as_json:
        # Readable non-ASCII text, but every control, bidi or invisible character as a JSON escape: the document
        # parses to the same value and cannot act on the terminal it is printed to.
        print(json_safe(json.dumps(view.to_data(), ensure_ascii=False, indent=2, default=str)))
    else:
        render_text(view, sys.stdout, full=full, db=path)
    return 0


def report(db: str, ref: str, out: str) -> int:
    # Imported here: only this command draws HTML.
    from stopwise._view.html import render_html

    target = output_file(out, "-o")
    view = asyncio.run(load_view(existing_db(db, reading=True), ref))
    target.write_text(render_html(view), encoding="utf-8")
    print(f"wrote {target} (run {terminal_safe(view.run.run_id)}, {view.run.steps} steps)")
    return 0


# --- the terminal rendering -------------------------------------------------------------------------------
#
# rich draws it (colour and wrapping where stdout is a terminal, plain text where it is not). Every stored
# string is escaped with terminal_safe first and handed to rich as Text, never as markup: a "[bold]" or an
# escape sequence in a model's answer prints as the characters it is.

_ACTION_STYLE = {"continue": "cyan", "complete": "green", "fail": "red", "suspend": "yellow", "cancel": "red"}
_CALL_MARK = {
    "denied": ("denied", "red"),
    "error": ("error", "red"),
    "not run": ("not run", "yellow"),
    "ok": ("->", "green"),
}
_OUTCOME_STYLE = {
    "continue": "cyan",
    "stop_success": "green",
    "stop_failure": "red",
    "escalate": "yellow",
    "replan": "magenta",
}


def render_text(view: RunView, out: TextIO, *, full: bool = False, db: Path | None = None) -> None:
    """Write ``view`` to ``out``: a header (how the run ended), the input, each step with its decision and
    records, the pending calls with why and the command that settles them (naming ``db``, the log it was read
    from, when given), and the output."""
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, highlight=False, markup=False, emoji=False, soft_wrap=True)

    def line(*parts: tuple[str, str] | str) -> None:
        text = Text()
        for part in parts:
            if isinstance(part, tuple):
                text.append(terminal_safe(part[0]), style=part[1])
            else:
                text.append(terminal_safe(part))
        console.print(text)

    run = view.run
    reason = "" if run.completion_reason is None else run.completion_reason.value
    status_style = {"completed": "bold green", "suspended": "bold yellow", "running": "bold"}.get(
        run.status.value, "bold red"
    )
    line(("run ", "bold"), (run.run_id, "bold"), f"  session {run.session_id}  agent {run.agent}")
    line(
        "status: ",
        (run.status.value, status_style),
        f"  completion reason: {reason}  steps: {run.steps}  "
        f"tokens: {run.usage.input_tokens} in / {run.usage.output_tokens} out",
    )
    if run.detail:
        line(f"detail: {_one_line(run.detail)}")
    if run.error is not None:
        line(("error: ", "red"), f"{run.error.code}: {_one_line(run.error.message)}")
    for text in view.inputs:
        line(("input: ", "bold"), _clip(text, full))
    if view.goal is not None and (view.goal.text or view.goal.criteria):
        line(("goal: ", "bold"), _clip(view.goal.text or "(the input)", full))
        for criterion in view.goal.criteria:
            line(("  criterion: ", "bold"), _clip(criterion, full))
    for step in view.steps:
        _render_step(step, line, full)
    for p in view.pending:
        line(
            ("pending ", "bold yellow"),
            (p.call_id, "yellow"),
            f"  {p.tool}({_clip(_json(p.args), full)})  ",
            (p.describe(), "yellow"),
        )
    if view.pending:
        line(f"settle with: {settle_command(run.session_id, 'FILE.py:NAME', db)}")
    if run.output is not None:
        output = run.output if isinstance(run.output, str) else _json(run.output)
        line(("output: ", "bold"), _clip(output, full))


def _render_step(step: StepView, line: Any, full: bool) -> None:
    if step.action is not None:
        head = f"step {step.step}" + (" (forced)" if step.forced else "")
        decision = step.action + (f" ({step.reason})" if step.reason else "")
        line()
        line((head + "  ", "bold"), (decision, _ACTION_STYLE.get(step.action, "")))
        if step.detail:
            line(f"  why: {_one_line(step.detail)}")
    elif not step.committed:
        line()
        line((f"step {step.step}  ", "bold"), ("not committed", "yellow"))
        line(f"  why: {UNCOMMITTED_WHY}")
    elif step.guardrails or step.guardian:
        line()
        line(("before step 1", "bold"))
    if step.fork is not None:
        f = step.fork
        line(("  forked from: ", "magenta"), f"session {f.source_session_id}, run {f.source_run_id}, step {f.at_step}")
    if step.plan is not None:
        line(("  prepare_step: ", "magenta"), _clip(step.plan.describe(), full))
    if step.history is not None:
        line(("  history: ", "magenta"), step.history.describe())
    if step.text:
        line(("  model: ", "dim"), _clip(step.text, full))
    for call in step.tool_calls:
        mark, style = _CALL_MARK[call.state]
        result = "" if call.result is None else _clip(_json(call.result), full)
        line(f"  tool {call.tool}({_clip(_json(call.args), full)}) ", (mark, style), f" {result}".rstrip())
    for g in step.guardrails:
        where = f" on {g.tool_call_id}" if g.tool_call_id else ""
        line(
            ("  guardrail ", "magenta"),
            f"{g.hook.value} {g.name}: {g.action}{where}",
            f" ({g.reason})" if g.reason else "",
        )
    for w in step.switches:
        switched = ", ".join([*(f"on {n}" for n in w.on), *(f"off {n}" for n in w.off)])
        line(("  tool switch ", "magenta"), f"by {w.source}: {switched}")
    for s in step.stop_guard:
        line(("  stop guard ", "magenta"), f"{s.guard}: {s.event}", f" ({_one_line(s.message)})" if s.message else "")
    for d in step.guardian:
        about = "turn" if d.call_id is None else f"call {d.call_id}"
        line(
            ("  guardian ", "magenta"),
            f"{about}: ",
            (d.outcome.value, _OUTCOME_STYLE.get(d.outcome.value, "")),
            "" if d.reason == d.outcome.value else f"  {_one_line(d.reason)}",
        )
        for r in readings(d):
            shown = "unanswered" if r.p is None else f"{r.p:.2f}"
            mark = " escalated" if r.escalated else (" in band" if r.in_band else "")
            line(
                f"    {r.name:<22} p={shown:<10} t*={r.threshold:.2f} ±{r.delta:.2f}",
                (" over" if r.over else "", "bold"),
                (mark, "yellow"),
            )
    for a in step.approvals:
        line(("  reviewer ", "magenta"), f"{a.decision} {a.call_id} ({a.tool})", f": {a.reason}" if a.reason else "")


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _one_line(value: object) -> str:
    """``value`` on one line; a value that is not a string as its ``str``."""
    return " ".join((value if isinstance(value, str) else str(value)).split())


def _clip(value: object, full: bool) -> str:
    """``value`` on one line; unless ``full``, at most ``_COLLAPSED`` characters of it followed by a note that says
    it was cut and how long it is, so a cut text never passes for a whole one. Only the head of a long text is
    looked at: a 10 MB tool result costs what its first lines do."""
    text = value if isinstance(value, str) else str(value)
    if full:
        return _one_line(text)
    head = _one_line(text[: 4 * _COLLAPSED])
    if len(head) <= _COLLAPSED and len(text) <= 4 * _COLLAPSED:
        return head
    return f"{head[:_COLLAPSED]}... [cut: {len(text):,} characters; --full prints all]"
