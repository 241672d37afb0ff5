"""The eval report as one self-contained HTML page: a reliability diagram per condition (inline SVG) and the
metrics table. No script, no stylesheet, image or font from anywhere: the page reads the same offline, attached
to a ticket or archived with a release.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from stopwise.evals.metrics import Bin, ConditionMetrics
from stopwise.evals.report import EvalReport

__all__ = ["render_html"]

_W, _H, _PAD = 300, 300, 36
_HIST = 60
_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1b1f24}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:0 0 6px}
.meta{color:#57606a;font-size:13px;margin-bottom:16px}
table{border-collapse:collapse;font-size:13px;margin-bottom:20px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:right} th:first-child,td:first-child{text-align:left}
th{background:#f6f8fa}
.grid{display:flex;flex-wrap:wrap;gap:20px}
.card{border:1px solid #d0d7de;border-radius:6px;padding:12px}
.card p{font-size:12px;color:#57606a;margin:4px 0 0;max-width:320px}
svg text{font-size:10px;fill:#57606a}
"""


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _x(p: float) -> float:
    return _PAD + p * (_W - 2 * _PAD)


def _y(p: float) -> float:
    return _H - _PAD - p * (_H - 2 * _PAD)


def _diagram(m: ConditionMetrics, before: ConditionMetrics | None) -> str:
    parts = [
        f'<svg width="{_W}" height="{_H + _HIST}" viewBox="0 0 {_W} {_H + _HIST}" role="img" '
        f'aria-label="reliability diagram of {html.escape(m.condition)}">',
        f'<rect x="{_PAD}" y="{_PAD}" width="{_W - 2 * _PAD}" height="{_H - 2 * _PAD}" fill="#fff" stroke="#d0d7de"/>',
    ]
    for k in range(0, 11, 2):
        v = k / 10
        parts.append(f'<line x1="{_x(v):.1f}" y1="{_y(0):.1f}" x2="{_x(v):.1f}" y2="{_y(1):.1f}" stroke="#eaeef2"/>')
        parts.append(f'<line x1="{_x(0):.1f}" y1="{_y(v):.1f}" x2="{_x(1):.1f}" y2="{_y(v):.1f}" stroke="#eaeef2"/>')
        parts.append(f'<text x="{_x(v):.1f}" y="{_H - _PAD + 14}" text-anchor="middle">{v:.1f}</text>')
        parts.append(f'<text x="{_PAD - 6}" y="{_y(v) + 3:.1f}" text-anchor="end">{v:.1f}</text>')
    parts.append(f'<line x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}" stroke="#8c959f" stroke-dasharray="4 3"/>')
    # The gap bars: from the bin's mean probability to its observed frequency, as in a reliability diagram.
    if before is not None:
        parts.append(_curve(before.bins, "#d1242f", "before calibration"))
    parts.append(_curve(m.bins, "#0969da", "observed"))
    t = m.t_star
    parts.append(
        f'<line x1="{_x(t):.1f}" y1="{_y(0):.1f}" x2="{_x(t):.1f}" y2="{_y(1):.1f}" stroke="#9a6700" '
        f'stroke-dasharray="2 2"><title>t* = {t:.3f}</title></line>'
    )
    if m.recommended is not None:
        r = m.recommended.threshold
        parts.append(
            f'<line x1="{_x(r):.1f}" y1="{_y(0):.1f}" x2="{_x(r):.1f}" y2="{_y(1):.1f}" stroke="#1a7f37">'
            f"<title>recommended threshold {r:.3f}</title></line>"
        )
    parts.append(f'<text x="{_W / 2}" y="{_H - 6}" text-anchor="middle">predicted probability</text>')
    parts.append(
        f'<text x="10" y="{_H / 2}" text-anchor="middle" transform="rotate(-90 10 {_H / 2})">observed frequency</text>'
    )
    # The histogram of predictions under the diagram: where the evaluator puts its mass.
    top = max((b.count for b in m.bins), default=0) or 1
    width = (_W - 2 * _PAD) / len(m.bins) if m.bins else 0
    base = _H + _HIST - 8
    for i, b in enumerate(m.bins):
        h = (_HIST - 16) * b.count / top
        parts.append(
            f'<rect x="{_PAD + i * width + 1:.1f}" y="{base - h:.1f}" width="{width - 2:.1f}" height="{h:.1f}" '
            f'fill="#8c959f"><title>{b.lo:.1f}-{b.hi:.1f}: {b.count} records</title></rect>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _curve(bins: Sequence[Bin], colour: str, label: str) -> str:
    points = [(b.mean_p, b.observed, b.count) for b in bins if b.count and b.mean_p is not None]
    if not points:
        return ""
    path = " ".join(f"{_x(p):.1f},{_y(o or 0):.1f}" for p, o, _ in points)
    out = [f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>']
    for p, o, n in points:
        out.append(
            f'<circle cx="{_x(p):.1f}" cy="{_y(o or 0):.1f}" r="{2 + min(n, 100) ** 0.5 / 2:.1f}" fill="{colour}" '
            f'fill-opacity="0.7"><title>{html.escape(label)}: mean p {p:.3f}, observed {o:.3f}, {n} records'
            f"</title></circle>"
        )
    return "".join(out)


def render_html(report: EvalReport) -> str:
    """The page, as one string. Every text from the report is escaped."""
    esc = html.escape
    before = report.before_calibration
    rows = []
    for name, m in report.conditions.items():
        rec = m.recommended
        cells = [
            esc(name),
            str(m.n),
            str(m.positives),
            str(m.uncertain),
            str(m.skipped),
            *([_num(before[name].ece if name in before else None)] if before is not None else []),
            _num(m.ece),
            _num(m.ece_floor),
            _num(m.mce),
            _num(m.brier),
            _num(m.auroc),
            f"{m.t_star:.3f}",
            _num(m.cost_at_t_star),
            _num(None if rec is None else rec.threshold),
            _num(None if rec is None else rec.cost),
            _num(m.band_rate),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    headers = ["condition", "n", "positives", "uncertain", "skipped"]
    headers += ["ECE before"] if before is not None else []
    headers += [
        "ECE",
        "ECE floor",
        "MCE",
        "Brier",
        "AUROC",
        "t*",
        "cost at t*",
        "recommended t",
        "cost at t",
        "in band at t*",
    ]
    cards = []
    for name, m in report.conditions.items():
        b = None if before is None else before.get(name)
        legend = "blue: observed frequency per bin; dashed grey: perfect calibration; brown: t*; green: "
        legend += "recommended threshold; grey bars: how many records per bin."
        if b is not None:
            legend += " Red: before calibration."
        cards.append(
            f'<div class="card"><h2>{esc(name)}</h2>{_diagram(m, b)}'
            f"<p>ECE {_num(m.ece)}, AUROC {_num(m.auroc)}, n {m.n}. {esc(legend)}</p></div>"
        )
    skipped = "".join(f"<li>{count}: {esc(reason)}</li>" for reason, count in sorted(report.skipped.items()))
    meta = (
        f"{esc(report.evaluator)} ({esc(report.model_version)}) on {esc(', '.join(report.traces))}, split "
        f"{esc(report.split)}" + (f", calibration {esc(report.calibration)}" if report.calibration else "")
    )
    meta += f"; {report.evaluated} records evaluated in {report.calls} evaluator calls"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8"><title>stopwise eval: '
        f"{esc(report.evaluator)}</title><style>{_STYLE}</style></head><body>"
        f'<h1>stopwise eval</h1><div class="meta">{meta}</div>'
        "<table><thead><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in headers)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + (f"<p>Skipped records:</p><ul>{skipped}</ul>" if skipped else "")
        + f'<div class="grid">{"".join(cards)}</div>'
        "</body></html>\n"
    )
