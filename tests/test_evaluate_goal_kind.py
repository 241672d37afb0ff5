"""The goal-kind reader on real user utterances (``evals/evaluate_goal_kind.py``): every intent labelled once, the
rates computed as documented, and the committed figures those of the reader as it stands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "evals"))

import evaluate_goal_kind as ev  # noqa: E402

from stopwise.guardian.goal_kind import GoalKind  # noqa: E402

FIGURES = ROOT / "evals" / "calibration" / "goal_kind.json"


def test_every_intent_of_every_corpus_is_labelled_and_no_label_names_an_absent_intent() -> None:
    labels = ev.read_labels()
    used = {(u.corpus, u.intent) for u in [*ev.read_banking77(), *ev.read_clinc150(), *ev.read_hwu64()]}
    assert used == set(labels)
    assert len([k for k in labels if k[0] == ev.DEV]) == 77
    assert len([k for k in labels if k[0] == ev.SEEN]) == 150
    assert len([k for k in labels if k[0] == ev.HELDOUT]) == 64


def test_an_intent_labelled_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("corpus,intent,label,why\nx,a,change,\nx,a,other,\n", encoding="utf-8")
    with pytest.raises(ValueError, match="labelled twice"):
        ev.read_labels(path)


def test_recall_counts_change_intents_false_alarm_other_intents_and_mixed_neither() -> None:
    labels = {
        ("c", "cancel"): ev.IntentKind.CHANGE,
        ("c", "fee"): ev.IntentKind.OTHER,
        ("c", "lost"): ev.IntentKind.MIXED,
    }
    utterances = [
        ev.Utterance("c", "Cancel it", "cancel"),
        ev.Utterance("c", "How do I cancel it?", "cancel"),
        ev.Utterance("c", "What is the fee?", "fee"),
        ev.Utterance("c", "Delete the fee", "fee"),
        ev.Utterance("c", "Block my card", "lost"),
    ]
    s = ev.score("c", utterances, labels, "goal_kind", ev.READERS["goal_kind"])
    assert (s.change, s.other, s.mixed) == (2, 2, 1)
    assert (s.recall, s.false_alarm, s.mixed_change) == (0.5, 0.5, 1.0)
    assert s.missed_as == {GoalKind.QUESTION.value: 1}


def test_the_committed_figures_are_the_readers_as_it_stands(tmp_path: Path) -> None:
    # A change to the reader must come with its new figures (and docs/evals.md's table).
    out = tmp_path / "figures.json"
    assert ev.main(["--json", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(FIGURES.read_text(encoding="utf-8"))
