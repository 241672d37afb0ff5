"""The learning path: labelled examples from a store's log, as trace records.

Every resolution of a guardian escalation is a ``guardian_label`` record in the log (a judge's, committed with
the step it settled; a human's, committed when ``runner.resume`` settles the review): the condition, whether it
held, the projection's rendered text and hash, who said so, and the evaluator's probability when it was known.
``export_labels`` turns each into a ``TraceRecord``.

What a record carries, decided here:

- ``text`` is the rendered projection as the label recorded it, verbatim. ``projection`` is the structured
  projection parsed back from that text when rendering the parse gives exactly the same text
  (``parse_projection_text``); otherwise (an elided middle, a layout this version does not render) ``null``: a
  *text-only* record, which model evaluators answer and the ``RuleEvaluator`` skips with a note.
- ``label`` is a bool: whether the condition held, in the resolver's judgement (a human's Approve clears the
  concern: ``false``; Reject and Terminate confirm it: ``true``).
- ``split`` is stable per run (a hash of the run id), ``test_fraction`` of the runs going to ``test``: the
  labels of one run, which share most of their state, never straddle the two splits.
- ``source`` is ``escalation/<judge|human>``, ``kind`` is ``escalation``; ``extra`` keeps the provenance:
  ``session_id``, ``run_id``, ``step``, ``state_hash``, ``label_source``, ``evaluator``, ``model_version`` and
  ``evaluator_p`` (the probability the live evaluator gave, read from the step's decision record when the label
  does not carry it).

A label without a state (nothing to evaluate) is left out. Approval decisions on calls gated by the ``risk``
question are not exported: approving an irreversible action says it is acceptable, not that it is not
irreversible, so they are no label for the risk question.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from stopwise.errors import UnreadableEntry
from stopwise.evals.traces import TraceRecord, parse_projection_text
from stopwise.guardian.records import GuardianConfig, UnresolvedConfig
from stopwise.store.base import Store
from stopwise.store.walk import every_session, sessions_named

__all__ = ["export_labels", "label_record"]

LABEL_TYPE = "guardian_label"


async def export_labels(
    store: Store,
    *,
    sessions: Iterable[str] | None = None,
    test_fraction: float = 0.2,
    on_unreadable: Callable[[UnreadableEntry], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[TraceRecord]:
    """Every ``guardian_label`` in ``store`` (or in ``sessions``), oldest first within a session, as records.

    The whole store is read one session at a time (``stopwise.store.walk.every_session``), calling
    ``progress(done, total)`` after each. A session with a log entry this version cannot read raises
    ``UnreadableEntry``; with ``on_unreadable`` it is handed to that callback instead and the export goes on with
    the other sessions."""
    if not 0 <= test_fraction <= 1:
        raise ValueError(f"test_fraction must be in [0, 1], got {test_fraction!r}")
    out: list[TraceRecord] = []
    if sessions is None:
        walk = every_session(store, progress=progress, on_unreadable=on_unreadable)
    else:
        walk = sessions_named(store, sessions, on_unreadable=on_unreadable)
    async for snapshot in walk:
        session_id = snapshot.session_id
        decisions: dict[tuple[str, int, str], Mapping[str, Any]] = {}
        configs: dict[str, GuardianConfig] = {}  # a run's decisions name the config it holds once
        for entry in snapshot.entries:
            for r in entry.records:
                if r.get("type") == GuardianConfig.TYPE:
                    config = GuardianConfig.from_data(r)
                    configs[config.key] = config
                elif r.get("type") == "guardian":
                    key = r.get("config")
                    if key is not None:
                        if key not in configs:
                            raise UnresolvedConfig(str(key))
                        r = configs[key].expand(r)
                    decisions[(str(r.get("run_id")), int(r.get("step", 0)), str(r.get("state_hash")))] = r
        for entry in snapshot.entries:
            for r in entry.records:
                if r.get("type") == LABEL_TYPE and r.get("state"):
                    decision = decisions.get((str(r.get("run_id")), int(r.get("step", 0)), str(r.get("state_hash"))))
                    out.append(label_record(r, session_id, decision, test_fraction))
    return out


def label_record(
    label: Mapping[str, Any],
    session_id: str,
    decision: Mapping[str, Any] | None = None,
    test_fraction: float = 0.2,
) -> TraceRecord:
    """One ``guardian_label`` as a trace record; ``decision`` is the guardian decision record of the same step
    and state, where the evaluator's probability and identity are read from when the label lacks them."""
    condition = str(label["condition"])
    run_id = str(label.get("run_id", ""))
    step = int(label.get("step", 0))
    source = str(label.get("source", "unknown"))
    text = str(label.get("state") or "")
    p = label.get("evaluator_p")
    evaluator = model_version = None
    if decision is not None:
        evaluator, model_version = decision.get("evaluator"), decision.get("model_version")
        if p is None:
            p = _recorded_p(decision, condition)
    return TraceRecord(
        id=f"{run_id}/step-{step}/{condition}/{source}",
        condition=condition,
        label=bool(label["label"]),
        split=_split(run_id, test_fraction),
        source=f"escalation/{source}",
        projection=parse_projection_text(text) if text else None,
        text=text,
        kind="escalation",
        extra={
            "session_id": session_id,
            "run_id": run_id,
            "step": step,
            "state_hash": label.get("state_hash"),
            "label_source": source,
            "evaluator": evaluator,
            "model_version": model_version,
            "evaluator_p": p,
        },
    )


def _recorded_p(decision: Mapping[str, Any], condition: str) -> float | None:
    answer = decision.get("answers", {}).get(condition)
    spec = next((c for c in decision.get("conditions", ()) if c.get("name") == condition), None)
    if not answer or spec is None or answer.get("uncertain"):
        return None
    dist = answer.get("distribution", {})
    return min(1.0, max(0.0, sum(float(dist.get(label, 0.0)) for label in spec.get("fires_on", ()))))


def _split(run_id: str, test_fraction: float) -> str:
    # A hash, not a random draw: exporting the same log twice gives the same split.
    bucket = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big") / 2**64
    return "test" if bucket < test_fraction else "train"
