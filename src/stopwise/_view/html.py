"""One run as a self-contained HTML page: inline CSS and SVG, no script, nothing fetched from the network.

Every stored string goes through ``html.escape`` (quotes included), so a model's answer or a tool's result
shows as text and never as markup; in text, a control, bidi or invisible character shows as a marked escape
(``escape_text``), so it can neither reorder nor hide what the page says. The page stays bounded whatever the
run: long texts are cut with a note, and of a very long run the first and last steps are drawn.

The page's sections carry stable ids and data attributes that the browser test reads: ``#summary``, ``#steps``
(one ``.step`` per step, ``data-step``), ``#guardian`` (one ``svg.series`` per condition, ``data-condition``),
``#pending``; a forked run's origin is ``#forked-from`` in the summary and a ``.fork`` record on the step it
continues from, each tool switch a ``.switch`` record (``data-step``) on the step that committed it.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from stopwise._terminal import HIDDEN_IN_TEXT, terminal_safe
from stopwise._view.timeline import UNCOMMITTED_WHY, ConditionPoint, ConditionSeries, RunView, StepView, readings
from stopwise.records import ForkRecord
from stopwise.tool_switches import ToolSwitchRecord

__all__ = ["escape_attr", "escape_text", "page", "render_html"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#1d232b;padding:0 16px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #dde2e8}
.meta{color:#5b6572}.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;color:#fff}
.completed{background:#2e8540}.failed,.cancelled{background:#c23030}.suspended{background:#c58a00}
.running{background:#5b6572}
.step{border-left:3px solid #dde2e8;padding:4px 0 4px 12px;margin:10px 0}
.step.complete{border-color:#2e8540}.step.fail,.step.cancel{border-color:#c23030}.step.suspend,.step.uncommitted{border-color:#c58a00}
.decision{font-weight:600}.text{white-space:pre-wrap;background:#f5f7f9;padding:6px 8px;border-radius:4px}
details{margin:4px 0}summary{cursor:pointer}pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;
background:#f5f7f9;padding:6px 8px;border-radius:4px;font-size:12px}
.rec{margin:2px 0;font-size:13px}.tag{font-size:11px;text-transform:uppercase;color:#fff;background:#6b4fa3;
padding:0 6px;border-radius:3px;margin-right:6px}.err{color:#c23030}.ok{color:#2e8540}
table{border-collapse:collapse;font-size:12px;margin:4px 0}td,th{padding:1px 8px;text-align:left}
th{color:#5b6572;font-weight:500}.over{font-weight:700}.band{color:#c58a00}
svg.series{background:#fbfcfd;border:1px solid #dde2e8;border-radius:4px;margin:6px 0}
.ctl{color:#c23030;background:#fde8e8;font-family:monospace}.cut{color:#5b6572;font-style:italic}
.pending{background:#fff7e0;border:1px solid #e8c866;padding:8px 12px;border-radius:4px;margin:6px 0}
"""

_OUTCOME_COLOUR = {
    "continue": "#3a7bd5",
    "stop_success": "#2e8540",
    "stop_failure": "#c23030",
    "escalate": "#c58a00",
    "replan": "#8e44ad",
}


def page(title: str, body: str) -> str:
    """A whole document around ``body`` (already HTML), with the report's style and a policy that loads nothing:
    no script, no image, no font, no request but a form's own."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{_flat(title)}</title><style>{_CSS}</style></head><body>\n{body}\n</body></html>"
    )


def render_html(view: RunView, *, nav: str = "", actions: str = "") -> str:
    """The page for ``view``: a whole HTML document as a string. ``nav`` (HTML) goes first; ``actions`` (HTML,
    e.g. ``stopwise serve``'s decision form) goes under the pending calls."""
    return page(f"stopwise run {view.run.run_id}", nav + _body(view, actions))


def _body(view: RunView, actions: str) -> str:
    run = view.run
    steps = [s for s in view.steps if s.step > 0 or _has_records(s)]
    hidden: list[StepView] = []
    if len(steps) > _STEPS_SHOWN:  # the first and the last steps; the middle is named, not drawn
        half = _STEPS_SHOWN // 2
        hidden, steps = steps[half:-half], steps[:half] + steps[-half:]
    texts = len(view.inputs) + len(view.pending) + 1 + sum(1 + 2 * len(s.tool_calls) for s in steps)
    limit = max(_MIN_LONG, min(_LONG, _PAGE_TEXT // texts))
    reason = "" if run.completion_reason is None else run.completion_reason.value
    parts = [
        "<section id='summary'>",
        f"<h1>Run {_e(run.run_id)}</h1>",
        f"<div class='meta'>session {_e(run.session_id)} · agent {_e(run.agent)} · "
        f"{run.steps} step{'' if run.steps == 1 else 's'} · "
        f"{run.usage.input_tokens} tokens in / {run.usage.output_tokens} out</div>",
        f"<p><span class='badge {_a(run.status.value)}' id='status'>{_e(run.status.value)}</span> "
        f"completion reason <b id='reason'>{_e(reason) or '-'}</b></p>",
    ]
    origin = next((s.fork for s in reversed(view.steps) if s.fork is not None), None)
    if origin is not None:  # the latest fork is where this run came from (a fork of a fork copies the first)
        parts.append(f"<p id='forked-from'><b>Forked</b> from {_forked_from(origin)}</p>")
    if run.detail:
        parts.append(f"<p>Why: {_e(run.detail)}</p>")
    if run.error is not None:
        parts.append(f"<p class='err'>Error {_e(str(run.error.code))}: {_e(run.error.message)}</p>")
    for text in view.inputs:
        parts.append(f"<p><b>Input</b></p><div class='text'>{_long(text, limit)}</div>")
    if view.goal is not None and (view.goal.text or view.goal.criteria):
        criteria = "".join(f"<li>{_e(c)}</li>" for c in view.goal.criteria)
        parts.append(
            f"<p><b>Goal</b></p><div class='text' id='goal'>{_e(view.goal.text or '(the input)')}</div>"
            + (f"<ul id='criteria'>{criteria}</ul>" if criteria else "")
        )
    parts.append("</section>")
    if view.pending:
        parts.append("<section id='pending'><h2>Waiting for a decision</h2>")
        for p in view.pending:
            parts.append(
                f"<div class='pending' data-call='{_a(p.call_id)}'><b>{_e(p.tool)}</b> <code>{_e(p.call_id)}"
                f"</code><br>{_e(p.describe())}<pre>{_long(_json(p.args), limit)}</pre></div>"
            )
        parts.append(actions)
        parts.append("</section>")
    if view.series:
        parts.append("<section id='guardian'><h2>Guardian: probability per turn against the threshold</h2>")
        legend = " ".join(
            f"<span style='color:{colour}'>&#9679; {outcome}</span>" for outcome, colour in _OUTCOME_COLOUR.items()
        )
        parts.append(
            f"<div class='meta'>Marker colour: the decision's outcome ({legend}); a large marker: this condition "
            "escalated; hollow at 0: unanswered. Dashed line: t*; shaded: the uncertain band t* ± delta.</div>"
        )
        parts.extend(_plot(s) for s in view.series)
        parts.append("</section>")
    parts.append("<section id='steps'><h2>Steps</h2>")
    for s in steps:
        parts.append(_step(s, limit))
        if hidden and s is steps[_STEPS_SHOWN // 2 - 1]:
            parts.append(
                f"<p class='cut' id='steps-cut'>... {len(hidden):,} steps not shown here (steps {hidden[0].step} to "
                f"{hidden[-1].step}); stopwise show RUN prints every step</p>"
            )
    parts.append("</section>")
    if run.output is not None:
        parts.append(
            f"<section id='output'><h2>Output</h2><div class='text'>{_long(_json(run.output), limit)}</div></section>"
        )
    return "\n".join(parts)


def _step(step: StepView, limit: int) -> str:
    action = step.action or ("input" if step.committed else "uncommitted")
    title = "Before the first step" if step.step == 0 else f"Step {step.step}"
    out = [f"<div class='step {_a(action)}' data-step='{step.step}'>"]
    decision = "" if step.action is None else f"{step.action}" + (f" ({step.reason})" if step.reason else "")
    if not step.committed:
        decision = "not committed"
    forced = " · forced" if step.forced else ""
    out.append(f"<div><b>{title}</b>{forced} <span class='decision'>{_e(decision)}</span></div>")
    if step.detail:
        out.append(f"<div class='meta'>{_e(step.detail)}</div>")
    if not step.committed:
        out.append(f"<div class='meta'>{_e(UNCOMMITTED_WHY)}</div>")
    if step.fork is not None:
        out.append(f"<div class='rec fork'><span class='tag'>fork</span>forked from {_forked_from(step.fork)}</div>")
    if step.plan is not None:
        out.append(f"<div class='rec plan'><span class='tag'>prepare_step</span>{_e(step.plan.describe())}</div>")
    if step.history is not None:
        out.append(f"<div class='rec history'><span class='tag'>history</span>{_e(step.history.describe())}</div>")
    if step.text:
        out.append(f"<div class='text'>{_long(step.text, limit)}</div>")
    for call in step.tool_calls:
        css = {"denied": "err", "error": "err", "ok": "ok"}.get(call.state, "")
        mark = f"<span class='{css}'>{call.state}</span>"
        out.append(
            f"<details class='tool' data-call='{_a(call.call_id)}'><summary>tool <b>{_e(call.tool)}</b> {mark}"
            f"</summary><div>arguments</div><pre>{_long(_json(call.args), limit)}</pre>"
            f"<div>result</div><pre>{_long(_json(call.result), limit)}</pre></details>"
        )
    for g in step.guardrails:
        where = f" on {g.tool_call_id}" if g.tool_call_id else ""
        why = f": {g.reason}" if g.reason else ""
        out.append(
            f"<div class='rec guardrail'><span class='tag'>guardrail</span>{_e(g.hook.value)} {_e(g.name)} "
            f"<b>{_e(g.action)}</b>{_e(where)}{_e(why)}</div>"
        )
    out.extend(_switch(w) for w in step.switches)
    for s in step.stop_guard:
        note = f": {s.message}" if s.message else ""
        out.append(
            f"<div class='rec stopguard'><span class='tag'>stop guard</span>{_e(s.guard)} <b>{_e(s.event)}</b>"
            f"{_e(note)}</div>"
        )
    for d in step.guardian:
        about = "turn" if d.call_id is None else f"call {d.call_id}"
        rows = []
        for r in readings(d):
            cls = ("band" if r.in_band else "") + (" over" if r.over else "")
            shown = "unanswered" if r.p is None else f"{r.p:.2f}"
            rows.append(
                f"<tr class='{cls.strip()}'><td>{_e(r.name)}</td><td>{shown}</td>"
                f"<td>{r.threshold:.2f} ± {r.delta:.2f}</td><td>{' escalated' if r.escalated else ''}</td></tr>"
            )
        out.append(
            f"<div class='rec guardian'><span class='tag'>guardian</span>{_e(about)}: "
            f"<b style='color:{_OUTCOME_COLOUR.get(d.outcome.value, '#000')}'>{_e(d.outcome.value)}</b> "
            f"{_e(d.reason)}<table><tr><th>condition</th><th>p</th><th>t* ± delta</th><th></th></tr>"
            f"{''.join(rows)}</table></div>"
        )
    for a in step.approvals:
        why = f": {a.reason}" if a.reason else ""
        out.append(
            f"<div class='rec approval'><span class='tag'>reviewer</span><b>{_e(a.decision)}</b> "
            f"{_e(a.call_id)} ({_e(a.tool)}){_e(why)}</div>"
        )
    out.append("</div>")
    return "".join(out)


_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 640, 180, 40, 16, 22, 26


def _plot(series: ConditionSeries) -> str:
    """The condition's probability per decision (x: the decision's step), its threshold, the band t* ± delta,
    and a marker per decision coloured by its outcome (hollow: unanswered, plotted at 0). Of a long run, the line
    and the markers are thinned to a bounded number (``_PLOT_POINTS``; every decision that did not continue, or
    escalated, or went unanswered keeps its marker while they fit), and the plot says so."""
    points = series.points
    steps = [p.step for p in points]
    lo, hi = min(steps), max(steps)
    span = max(hi - lo, 1)
    inner_w, inner_h = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B
    # Decisions of one step (pre-execution checks and the turn) are spread a little so none hides another: each
    # point's place among its step's points, counted in one pass.
    per_step: dict[int, int] = {}
    place = []
    for p in points:
        place.append(per_step.get(p.step, 0))
        per_step[p.step] = place[-1] + 1

    def x(i: int) -> float:
        same = per_step[points[i].step]
        offset = (place[i] - (same - 1) / 2) * 8 if same > 1 else 0
        return _PAD_L + (points[i].step - lo) / span * inner_w + offset if hi > lo else _PAD_L + inner_w / 2 + offset

    def y(p: float) -> float:
        return _PAD_T + (1 - p) * inner_h

    t, d = series.threshold, series.delta
    band_top, band_bottom = y(min(1.0, t + d)), y(max(0.0, t - d))
    out = [
        f"<svg class='series' data-condition='{_a(series.name)}' width='{_W}' height='{_H}' "
        f"viewBox='0 0 {_W} {_H}' role='img' aria-label='{_a(series.name)} probability per turn'>",
        f"<text x='{_PAD_L}' y='14' font-size='12' font-weight='600'>{_flat(series.name)}</text>",
        f"<text x='{_W - _PAD_R}' y='14' font-size='11' text-anchor='end' fill='#5b6572'>t* = {t:.2f}, "
        f"band ± {d:.2f}</text>",
        f"<rect class='band' x='{_PAD_L}' y='{band_top:.1f}' width='{inner_w}' height='{band_bottom - band_top:.1f}' "
        "fill='#f3d98b' fill-opacity='0.45'/>",
        f"<line class='threshold' x1='{_PAD_L}' x2='{_W - _PAD_R}' y1='{y(t):.1f}' y2='{y(t):.1f}' stroke='#c58a00' "
        "stroke-dasharray='5 3'/>",
        f"<line x1='{_PAD_L}' x2='{_PAD_L}' y1='{_PAD_T}' y2='{_PAD_T + inner_h}' stroke='#9aa3ad'/>",
        f"<line x1='{_PAD_L}' x2='{_W - _PAD_R}' y1='{_PAD_T + inner_h}' y2='{_PAD_T + inner_h}' stroke='#9aa3ad'/>",
    ]
    for v in (0.0, 0.5, 1.0):
        out.append(f"<text x='{_PAD_L - 6}' y='{y(v) + 4:.1f}' font-size='10' text-anchor='end'>{v:.1f}</text>")
    ticks = sorted(set(steps))
    if len(ticks) > _PLOT_TICKS:  # labels a reader can tell apart, the first and the last step among them
        ticks = sorted({ticks[round(k * (len(ticks) - 1) / (_PLOT_TICKS - 1))] for k in range(_PLOT_TICKS)})
    for s in ticks:
        sx = _PAD_L + (s - lo) / span * inner_w if hi > lo else _PAD_L + inner_w / 2
        out.append(f"<text x='{sx:.1f}' y='{_H - 8}' font-size='10' text-anchor='middle'>{s}</text>")
    answered = [i for i, p in enumerate(points) if p.p is not None]
    stride = -(-len(answered) // _PLOT_POINTS)  # ceiling: the line keeps at most _PLOT_POINTS of them
    line = [i for k, i in enumerate(answered) if k % stride == 0 or k == len(answered) - 1] if answered else []
    if len(line) > 1:
        path = " ".join(f"{x(i):.1f},{y(prob):.1f}" for i in line if (prob := points[i].p) is not None)
        out.append(f"<polyline points='{path}' fill='none' stroke='#3a7bd5' stroke-width='1.5'/>")
    marked = _marked(points)
    if len(marked) < len(points):
        out.append(
            f"<text class='thinned' x='{_W - _PAD_R}' y='{_H - 8}' font-size='10' text-anchor='end' fill='#5b6572'>"
            f"markers: {len(marked):,} of {len(points):,} decisions</text>"
        )
    for i in marked:
        p = points[i]
        colour = _OUTCOME_COLOUR.get(p.outcome, "#000")
        py = y(p.p) if p.p is not None else y(0.0)
        fill = colour if p.p is not None else "none"
        radius = 6 if p.escalated else 4
        shown = "unanswered" if p.p is None else f"{p.p:.2f}"
        out.append(
            f"<circle class='marker' data-step='{p.step}' data-outcome='{_a(p.outcome)}' cx='{x(i):.1f}' "
            f"cy='{py:.1f}' r='{radius}' fill='{fill}' stroke='{colour}' stroke-width='1.5'><title>step {p.step} "
            f"({_flat(p.kind)}): p={shown}, {_flat(p.outcome)}</title></circle>"
        )
    out.append("</svg>")
    return "".join(out)


def _marked(points: tuple[ConditionPoint, ...]) -> list[int]:
    """Which points get a marker: all of them up to ``_PLOT_POINTS``; beyond, every decision that did not
    continue, escalated or went unanswered while they fit in half of it, and evenly spaced others for the rest."""
    if len(points) <= _PLOT_POINTS:
        return list(range(len(points)))
    notable = [i for i, p in enumerate(points) if p.outcome != "continue" or p.escalated or p.p is None]
    notable = notable[:: -(-len(notable) // (_PLOT_POINTS // 2))] if notable else []
    stride = -(-len(points) // (_PLOT_POINTS - len(notable)))
    return sorted(set(notable) | set(range(0, len(points), stride)))


def _has_records(step: StepView) -> bool:
    return bool(step.guardrails or step.stop_guard or step.guardian or step.approvals or step.switches or step.fork)


def _forked_from(fork: ForkRecord) -> str:
    return f"session {_e(fork.source_session_id)}, run {_e(fork.source_run_id)}, step {fork.at_step}"


def _switch(switch: ToolSwitchRecord) -> str:
    """A tool switch as ``show`` prints it: who switched which tools on or off, at which step."""
    changes = ", ".join([*(f"on {n}" for n in switch.on), *(f"off {n}" for n in switch.off)])
    by = switch.source + ("" if switch.tool_call_id is None else f" (call {switch.tool_call_id})")
    return (
        f"<div class='rec switch' data-step='{switch.step}'><span class='tag'>tool switch</span>at step "
        f"{switch.step} by <b>{_e(by)}</b>: {_e(changes)}</div>"
    )


# A page's size is bounded whatever the run: at most _STEPS_SHOWN steps are drawn (the first half and the last
# half), and its long texts (a tool's arguments or result, a reply, the input, the output) share _PAGE_TEXT
# characters: each is cut at _LONG characters, or less when there are many (never under _MIN_LONG), with a note
# that says so. A 10 MB tool result makes a page of kilobytes; a run of 100,000 steps a page of about 2 MB.
_STEPS_SHOWN = 1_000
_PLOT_POINTS = 1_000
"""At most this many decisions of a condition get a marker, and the probability line as many points."""
_PLOT_TICKS = 12
_LONG = 20_000
_MIN_LONG = 500
_PAGE_TEXT = 2_000_000


def escape_text(value: object) -> str:
    """``value`` as HTML element content: markup escaped (``html.escape``, quotes included), and every control,
    bidi or invisible character (``terminal_safe``'s set, but newline and tab) shown as a marked escape such as
    ``\\u202e``, so it can neither reorder nor hide what the page shows. A value that is not a string (a step
    number, a count) is shown as its ``str``."""
    text = value if isinstance(value, str) else str(value)
    out = []
    last = 0
    for m in HIDDEN_IN_TEXT.finditer(text):
        out.append(escape(text[last : m.start()], quote=True))
        out.append(f"<span class='ctl'>{escape(terminal_safe(m.group()))}</span>")
        last = m.end()
    out.append(escape(text[last:], quote=True))
    return "".join(out)


def escape_attr(value: object) -> str:
    """``value`` as an attribute value in quotes: markup and both quotes escaped, the value otherwise kept exact
    (a form field named after a call id must submit that id); a value that is not a string as its ``str``."""
    return escape(value if isinstance(value, str) else str(value), quote=True)


def _flat(value: object) -> str:
    """``value`` where no markup can mark an escape (the page's ``<title>``, SVG text): ``terminal_safe``'s
    escapes, then ``html.escape``."""
    return escape(terminal_safe(value if isinstance(value, str) else str(value)), quote=True)


_e, _a = escape_text, escape_attr


def _long(text: str, limit: int) -> str:
    """``escape_text`` of at most ``limit`` characters of ``text``, then a note of how long it is."""
    if len(text) <= limit:
        return escape_text(text)
    return (
        f"{escape_text(text[:limit])}<span class='cut'>... [cut: {len(text):,} characters; stopwise show RUN "
        "--json prints all]</span>"
    )


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, default=str)
