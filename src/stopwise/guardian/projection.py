"""The bounded projection of a run that the guardian reads: goal, criteria, recent steps, the pending proposal.

Tool results inside it are wrapped as untrusted data. The projection is capped in characters and hashed, so a
decision record names exactly the state it was made on.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from stopwise.messages import DENIED, TOOL_ERROR, Message, Role, ToolCall
from stopwise.row_copies import own_call, own_value
from stopwise.storable import storable_text

__all__ = ["ProjectedStep", "Projection", "fenced", "fresh_fence", "handed", "project", "shares", "tail_start"]

UNTRUSTED_OPEN = "<untrusted-tool-output>"
UNTRUSTED_CLOSE = "</untrusted-tool-output>"


@dataclass(frozen=True, slots=True)
class ProjectedCall:
    """One tool call of a step and what came back."""

    tool: str
    args: Any
    result: str
    """The result as the model saw it, truncated."""
    error: bool
    risk: str = "unknown"
    """The tool's declared risk class."""
    denied: bool = False
    """The call never ran: a guardrail blocked it or a reviewer rejected it (``error`` is then true too)."""
    call_id: str | None = None
    """The call's id (as its tool receipt names it), when the projection was made from a run's rows."""


@dataclass(frozen=True, slots=True)
class ProjectedStep:
    """One step of the run as the guardian sees it."""

    step: int
    text: str
    calls: tuple[ProjectedCall, ...] = ()


@dataclass(frozen=True, slots=True)
class Projection:
    """What the evaluator reads for one question set."""

    goal: str
    criteria: tuple[str, ...]
    steps: tuple[ProjectedStep, ...]
    """The last K steps, oldest first."""
    pending: ToolCall | None = None
    """The proposed call a pre-execution question is about."""
    pending_risk: str = "unknown"
    final: str | None = None
    """The reply the run would end on, when the turn is a natural finish."""
    max_chars: int = 8000
    text: str = field(init=False, repr=False)
    """The rendered projection, capped at ``max_chars``: what a model-based evaluator is sent."""
    state_hash: str = field(init=False, repr=False)

    # ``text`` and ``state_hash`` are rendered on first read, not in ``__init__``: an evaluator that reads the
    # structure (the rule evaluator over 100,000 labelled records) never pays for them. Their slots stay empty
    # until then, so reading one falls through to ``__getattr__``, which fills both; once set they never change.
    # Hidden from type checkers, which would otherwise accept any attribute name on a Projection.

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name != "text" and name != "state_hash":
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            # Under the log's storable-text rule (a lone surrogate from a goal or a tool becomes U+FFFD): the text
            # is hashed, sent to a model evaluator and kept in an escalation's record, all of which need UTF-8.
            text = storable_text(_bounded(self), where="the guardian's projection")
            object.__setattr__(self, "text", text)
            object.__setattr__(self, "state_hash", hashlib.sha256(text.encode()).hexdigest()[:16])
            return text if name == "text" else self.state_hash


def handed(p: Projection) -> Projection:
    """The copy of ``p`` an evaluator is handed: its calls' arguments and the proposed call are copied (the rest
    of it is immutable), so what the evaluator changes of them in place reaches neither the run's rows nor ``p``,
    whose text and hash the decision records. Its text is rendered again only when read."""
    steps = tuple(
        ProjectedStep(s.step, s.text, tuple(replace(c, args=own_value(c.args)) for c in s.calls)) if s.calls else s
        for s in p.steps
    )
    pending = own_call(p.pending) if p.pending is not None else None
    return Projection(p.goal, p.criteria, steps, pending, p.pending_risk, p.final, p.max_chars)


ELIDED = "\n[... earlier steps elided ...]\n"
WITHHELD = "(withheld)"
"""What a projection shows for a quarantined tool result in place of its text."""


@dataclass(frozen=True, slots=True)
class _Fence:
    """How the rendered text marks what came from the run rather than from the renderer."""

    open: str
    close: str
    every_field: bool
    """Whether the goal, the agent's words, its calls and the final answer are fenced too (else tool results
    only)."""
    key: str | None = None
    """A request's random fence key: a piece of the run's text that holds it raises ``ValueError`` as it is
    rendered (so only the pieces the capped text keeps are read, not a wide step's cut-away middle)."""

    def data(self, text: str) -> str:
        """``text`` (a piece of the run's text) as the rendered view shows it: fenced when ``every_field``."""
        return self.wrap(text) if self.every_field else text

    def wrap(self, text: str) -> str:
        """``text`` between the fence's marks, whatever ``every_field`` says (a tool result is always fenced)."""
        if self.key is not None and self.key in text:
            raise _KeyInContent("a fence key must be absent from the projection's content")
        return f"{self.open}{text}{self.close}"


class _KeyInContent(ValueError):
    """The run's text holds a fence key: ``fresh_fence`` draws another (a ``ValueError`` of any other origin is a
    bug and goes up)."""


_TOOL_OUTPUT = _Fence(UNTRUSTED_OPEN, UNTRUSTED_CLOSE, every_field=False)
"""``Projection.text``'s marks: tool results only, with fixed markers (what the record keeps and hashes)."""


def fenced(p: Projection, key: str) -> str:
    """The projection capped as ``text`` is, but every piece of text from the run (the goal, the agent's words,
    each call with its arguments, each tool result, the final answer, the proposed call) between ``<data KEY>``
    and ``</data KEY>``; the criteria (the developer's) and the layout lines stay bare. Raises ``ValueError``
    when ``key`` is empty or occurs in a piece of the run's text the capped view shows: only then can no content
    forge a fence. Only the lines the cap keeps are rendered, as for ``text``."""
    if not key:
        raise ValueError("a fence key must be non-empty")
    fence = _Fence(f"<data {key}>", f"</data {key}>", every_field=True, key=key)
    return storable_text(_bounded(p, fence), where="a fence")


def fresh_fence(p: Projection) -> tuple[str, str]:
    """A new random fence key (16 hex digits) and ``fenced(p, key)``. The key is drawn after the run's text is
    written, and drawn again in the unlikely case that text holds it: no text from the run can close its fence,
    and none can guess the key of the next request."""
    while True:
        key = secrets.token_hex(8)
        try:
            return key, fenced(p, key)
        except _KeyInContent:
            continue


def _bounded(p: Projection, fence: _Fence = _TOOL_OUTPUT) -> str:
    """The rendered projection capped at ``max_chars``: whole when it fits, else its head (the goal and criteria)
    and its tail (the latest steps), the middle mattering least. Renders only the lines those keep, from each end:
    a step of 3,000 calls costs what the kept characters cost, not 3,000 calls' worth of text."""
    limit = p.max_chars
    kept: list[str] = []
    size = -1  # the newlines between lines
    for line in _lines(p, fence):
        kept.append(line)
        size += len(line) + 1
        if size > limit:
            break
    else:
        return "\n".join(kept)
    head = limit // 3
    want = limit - head - 40
    if want <= 0:  # too small a cap for the elision note: its head alone
        return "\n".join(kept)[:limit]
    tail: list[str] = []
    size = -1
    for line in _lines_backward(p, fence):
        tail.append(line)
        size += len(line) + 1
        if size >= want:
            break
    return "\n".join(kept)[:head] + ELIDED + "\n".join(reversed(tail))[-want:]


def _render(p: Projection) -> str:
    """The whole rendered text, uncapped: what ``_bounded`` cuts (and what ``stopwise.evals.traces`` parses)."""
    return "\n".join(_lines(p, _TOOL_OUTPUT))


def _lines(p: Projection, fence: _Fence) -> Iterator[str]:
    """The projection's text, line by line (``_lines_backward`` yields the same lines last first)."""
    yield from _header(p, fence)
    for s in p.steps:
        yield _step_line(s, fence)
        for c in s.calls:
            yield from _call_lines(c, fence)
    yield from _footer(p, fence)


def _lines_backward(p: Projection, fence: _Fence) -> Iterator[str]:
    yield from reversed(_footer(p, fence))
    for s in reversed(p.steps):
        for c in reversed(s.calls):
            yield from reversed(_call_lines(c, fence))
        yield _step_line(s, fence)
    yield from reversed(_header(p, fence))


def _header(p: Projection, fence: _Fence) -> list[str]:
    lines = [f"GOAL: {fence.data(p.goal) if p.goal else '(not stated)'}"]
    if p.criteria:
        lines.append("ACCEPTANCE CRITERIA:")
        lines.extend(f"- {c}" for c in p.criteria)
    lines.append(f"RECENT STEPS ({len(p.steps)}):")
    return lines


def _step_line(s: ProjectedStep, fence: _Fence) -> str:
    return f"[step {s.step}] agent: {fence.data(s.text) if s.text else '(no text)'}"


def _call_lines(c: ProjectedCall, fence: _Fence) -> tuple[str, str]:
    args = json.dumps(c.args, ensure_ascii=False, default=str) if not isinstance(c.args, str) else c.args
    status = "denied" if c.denied else "error" if c.error else "ok"
    call = fence.data(f"{c.tool}({args})")
    return f"  call {call} [{c.risk}] -> {status}:", f"  {fence.wrap(c.result)}"


def _footer(p: Projection, fence: _Fence) -> list[str]:
    lines = []
    if p.final is not None:
        lines.append(f"FINAL ANSWER PROPOSED: {fence.data(p.final)}")
    if p.pending is not None:
        args = json.dumps(p.pending.args, ensure_ascii=False, default=str)
        call = fence.data(f"{p.pending.name}({args})")
        lines.append(f"PROPOSED NEXT ACTION: {call} [declared risk: {p.pending_risk}]")
    return lines


def project(
    messages: Sequence[Message],
    *,
    goal: str,
    criteria: Sequence[str] = (),
    last_k: int = 6,
    result_chars: int = 600,
    risks: Mapping[str, str] | None = None,
    pending: ToolCall | None = None,
    final: str | None = None,
    max_chars: int = 8000,
    steps_before: int = 0,
    step_chars: int | None = None,
) -> Projection:
    """Project a run's rows onto the last ``last_k`` steps.

    ``messages`` is the run from its input onwards, or any tail of it that starts at a step (an assistant row):
    ``steps_before`` then says how many steps of the run come before that tail, so the steps keep their numbers.
    The work is bounded by the rows from the oldest step kept onwards, not by the run's length.

    Each tool result is cut to ``result_chars``; ``step_chars`` (None: no limit) bounds the characters of
    results one step keeps in all. Past it every result of the step still shows, its head cut to a fair share
    (``shares``): a result shorter than its share is kept whole, and what it leaves goes to the longer ones."""
    risks = risks or {}
    start = tail_start(messages, last_k)
    before = steps_before + sum(1 for i in range(start) if messages[i].role is Role.ASSISTANT) if last_k else 0
    window = messages[start:]
    results = {m.tool_call_id: m for m in window if m.role is Role.TOOL}
    steps: list[ProjectedStep] = []
    for m in window:
        if m.role is not Role.ASSISTANT:
            continue
        rows = [results.get(c.id) for c in m.tool_calls]
        cuts = shares([_shown(r) for r in rows], result_chars, step_chars)
        calls = tuple(
            ProjectedCall(
                c.name,
                c.args,
                _result_text(row, cut),
                bool(row.metadata.get(TOOL_ERROR)) if row is not None else False,
                risks.get(c.name, "unknown"),
                bool(row.metadata.get(DENIED)) if row is not None else False,
                c.id,
            )
            for c, row, cut in zip(m.tool_calls, rows, cuts, strict=True)
        )
        steps.append(ProjectedStep(before + len(steps) + 1, _truncate(m.content, result_chars), calls))
    # The goal and the final answer are cut like a tool result, at ``max_chars`` (the rendered text shows no more
    # of them): an evaluator that reads the structure then costs the same on a 10 MB answer as on 8,000 characters.
    return Projection(
        _truncate(goal, max_chars),
        tuple(criteria),
        tuple(steps),
        pending,
        risks.get(pending.name, "unknown") if pending is not None else "unknown",
        None if final is None else _truncate(final, max_chars),
        max_chars,
    )


def tail_start(messages: Sequence[Message], last_k: int, lo: int = 0) -> int:
    """The index in ``messages`` of the oldest of its last ``last_k`` steps (assistant rows) at or after ``lo``,
    walking back only that far; ``len(messages)`` when ``last_k`` is 0, ``lo`` when there are fewer steps. A
    step's tool results follow it, so the rows from there on hold everything a projection shows of them."""
    if not last_k:
        return len(messages)
    seen = 0
    for i in range(len(messages) - 1, lo - 1, -1):
        if messages[i].role is Role.ASSISTANT:
            seen += 1
            if seen == last_k:
                return i
    return lo


def shares(lengths: Sequence[int], each: int, total: int | None) -> list[int]:
    """How many characters of each of one step's results a projection keeps: ``each`` apiece while the step's
    results fit in ``total`` (None: no limit), else a max-min fair split of ``total`` (pure). Every result gets a
    share, so none goes unread; a result shorter than its share is kept whole and the rest is split evenly among
    the longer ones, so no single long result (a 10 MB page, one of 500) can crowd out another."""
    wanted = [min(n, each) for n in lengths]
    if total is None or sum(wanted) <= total:
        return [each] * len(lengths)
    out = [0] * len(wanted)
    left = total
    for k, i in enumerate(sorted(range(len(wanted)), key=wanted.__getitem__)):
        out[i] = min(wanted[i], left // (len(wanted) - k))
        left -= out[i]
    return out


def _shown(row: Message | None) -> int:
    # What a result's text would cost in full; a missing or withheld one shows a short fixed notice instead.
    return len(row.content) if row is not None and not row.metadata.get("quarantined") else 0


def _result_text(row: Message | None, n: int) -> str:
    if row is None:
        return "(no result)"
    if row.metadata.get("quarantined"):
        # The evaluator judged this output already; the withheld notice itself is not evidence of anything.
        return WITHHELD
    return _compact_head(row.content, n)


def _truncate(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more characters]"


_BLANK_RUN = 64
"""A run of at least this many white-space characters in a tool result is shown as one (``_PADDING``)."""
_PADDING = re.compile(r'\s{64,}|(?P<key>"data": ?")[A-Za-z0-9+/=\\]{256,}(?=")')
"""What a tool result may hold that says nothing and only pushes its text past the cut: a long blank run, and the
base64 data of a media block (MCP's and the providers' image and audio blocks carry it under ``"data"``)."""


_PADDING_START = re.compile(r'\s{64}|"data": ?"')
"""The first characters of a match of ``_PADDING``."""


def _shrunk(m: re.Match[str]) -> str:
    if m.group("key") is not None:
        return m.group("key") + "..."
    return "\n" if "\n" in m.group() else " "


def _compact_head(text: str, n: int) -> str:
    """``text`` cut at ``n`` characters as ``_truncate`` cuts it, with each long blank run shown as one character
    and each media block's data elided (``_PADDING``) before the cut: 9,000 spaces or a screenshot in front of an
    injection no longer push it out of what the guardian reads, while the acting model reads it whole. A text
    without such padding is shown exactly as ``_truncate`` shows it. The scan stops once ``n`` characters are
    shown: a 10 MB page costs what its head costs (a 10 MB blank run costs one C scan of it)."""
    out: list[str] = []
    size = pos = 0
    while size < n and pos < len(text):
        limit = pos + (n - size)
        # Where padding may start before the cut (its first characters suffice), then the whole of it from there.
        start = _PADDING_START.search(text, pos, limit + _BLANK_RUN)
        if start is None or start.start() >= limit:
            out.append(text[pos:limit])
            size, pos = n, limit
            break
        m = _PADDING.match(text, start.start())
        end, shown = (start.end(), start.group()) if m is None else (m.end(), _shrunk(m))  # short data: kept
        out.append(text[pos : start.start()])
        out.append(shown)
        size += start.start() - pos + len(shown)
        pos = end
    head = "".join(out)
    if pos >= len(text) and len(head) <= n:
        return head
    more = len(text) - pos + max(0, len(head) - n)
    return head[:n] + f"... [{more} more characters]"
