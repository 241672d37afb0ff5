"""The goal-kind reader on how users really ask: user utterances of three public intent corpora.

    python evals/evaluate_goal_kind.py [--json evals/calibration/goal_kind.json] [--misses banking77]

``stopwise.guardian.goal_kind`` was written on benchmark goals (mostly bare imperatives). A user of a customer-service
or assistant agent asks otherwise ("Hello! I would like to return the headphones", "Can you please exchange my
shoes?"). Three corpora of real user utterances, each labelled by its authors with an intent:

- ``banking77`` (PolyAI, CC-BY-4.0): 13,083 online-banking queries over 77 intents, ``train.csv`` and ``test.csv``
  (both used: no model is fitted here). The DEV corpus: what the reader's rules were chosen on.
- ``clinc150`` (Clinc, CC-BY-3.0): the 4,500 in-scope ``test`` utterances of ``data_full.json``, 150 intents over
  banking, travel, home, work, car, small talk... The HELD-OUT corpus: scored once, after the choice was committed
  (the bound, pre-registered in docs/evals.md). Its out-of-scope rows carry no intent and are not used. Read
  after that scoring, so now SEEN: a second dev corpus.
- ``hwu64`` (Liu et al. 2019, CC-BY-4.0): the 10,997 utterances of the ten cross-validation test folds of
  NLU-Evaluation-Data, 64 intents of a home assistant (alarms, lights, music, lists, takeaway, questions...). The
  HELD-OUT corpus now: labelled and its bound pre-registered before any figure on it, scored before and after one
  change chosen on the other two, never read for errors.

Labels are OURS and per INTENT, never per utterance (``evals/data/intent_kinds.csv``, with a line of why): ``change``
when the intent asks for something that changes state (cancel, transfer, book, refund, change, order, top up,
set...), ``other`` when it asks for information or reports a problem, ``mixed`` when its utterances split between the
two (a lost card reported vs. a request to block it): mixed intents are counted apart, in neither rate.

Per corpus: CHANGE recall (the share of change-intent utterances the reader calls CHANGE), false alarm (the share of
other-intent utterances it calls CHANGE), what it calls the missed ones, and the two trivial baselines: everything
CHANGE (recall 1, false alarm 1) and "a change verb anywhere in the utterance" (``goal_kind.CHANGE_VERBS``).
"""

from __future__ import annotations

import argparse
import csv
import enum
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from stopwise.guardian.goal_kind import CHANGE_VERBS, GoalKind, goal_kind

ROOT = Path(__file__).resolve().parent
LABELS = ROOT / "data" / "intent_kinds.csv"
BANKING77 = (ROOT / "third_party" / "banking77" / "train.csv", ROOT / "third_party" / "banking77" / "test.csv")
CLINC150 = ROOT / "third_party" / "clinc150" / "test.json"
HWU64 = ROOT / "third_party" / "hwu64" / "utterances.csv"
DEV, SEEN, HELDOUT = "banking77", "clinc150", "hwu64"


class IntentKind(enum.Enum):
    CHANGE = "change"
    OTHER = "other"
    MIXED = "mixed"


@dataclass(frozen=True)
class Utterance:
    corpus: str
    text: str
    intent: str


@dataclass(frozen=True)
class Score:
    """One corpus's figures for one reader."""

    corpus: str
    reader: str
    change: int
    """Utterances of change intents."""
    other: int
    """Utterances of other intents."""
    mixed: int
    recall: float
    """Share of change-intent utterances read as CHANGE."""
    false_alarm: float
    """Share of other-intent utterances read as CHANGE."""
    mixed_change: float
    """Share of mixed-intent utterances read as CHANGE (in neither rate)."""
    missed_as: dict[str, int]
    """What the reader called the change-intent utterances it did not call CHANGE."""


def read_labels(path: Path = LABELS) -> dict[tuple[str, str], IntentKind]:
    """(corpus, intent) -> our label. A label outside ``IntentKind`` or a repeated intent is a ``ValueError``."""
    table: dict[tuple[str, str], IntentKind] = {}
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            key = (row["corpus"], row["intent"])
            if key in table:
                raise ValueError(f"{path}: intent {key} labelled twice")
            table[key] = IntentKind(row["label"])
    return table


def read_banking77(paths: Sequence[Path] = BANKING77) -> list[Utterance]:
    out: list[Utterance] = []
    for path in paths:
        with path.open(newline="", encoding="utf-8") as f:
            out.extend(Utterance(DEV, row["text"], row["category"]) for row in csv.DictReader(f))
    return out


def read_clinc150(path: Path = CLINC150) -> list[Utterance]:
    rows = json.loads(path.read_text(encoding="utf-8"))["test"]
    return [Utterance(SEEN, text, intent) for text, intent in rows]


def read_hwu64(path: Path = HWU64) -> list[Utterance]:
    """The user's own words (``answer_from_user``, not the annotators' normalised text) of each utterance."""
    with path.open(newline="", encoding="utf-8") as f:
        return [Utterance(HELDOUT, row["text"], row["intent"]) for row in csv.DictReader(f)]


def verb_anywhere(text: str) -> GoalKind:
    """The trivial baseline: CHANGE when any word of the text is a change verb."""
    return GoalKind.CHANGE if set(re.findall(r"[a-z]+", text.lower())) & CHANGE_VERBS else GoalKind.OTHER


def everything_change(text: str) -> GoalKind:
    return GoalKind.CHANGE


READERS: dict[str, Callable[[str], GoalKind]] = {
    "goal_kind": goal_kind,
    "change verb anywhere": verb_anywhere,
    "everything CHANGE": everything_change,
}


def score(
    corpus: str,
    utterances: Iterable[Utterance],
    labels: dict[tuple[str, str], IntentKind],
    reader: str,
    read: Callable[[str], GoalKind],
) -> Score:
    """The reader's figures on one corpus. An intent missing from ``labels`` is a ``KeyError``: every intent of a
    corpus must be labelled, so none is silently dropped."""
    seen: Counter[IntentKind] = Counter()
    called: Counter[IntentKind] = Counter()
    missed: Counter[str] = Counter()
    for u in utterances:
        label = labels[(u.corpus, u.intent)]
        kind = read(u.text)
        seen[label] += 1
        if kind is GoalKind.CHANGE:
            called[label] += 1
        elif label is IntentKind.CHANGE:
            missed[kind.value] += 1

    def share(label: IntentKind) -> float:
        return round(called[label] / seen[label], 4) if seen[label] else 0.0

    return Score(
        corpus,
        reader,
        seen[IntentKind.CHANGE],
        seen[IntentKind.OTHER],
        seen[IntentKind.MIXED],
        share(IntentKind.CHANGE),
        share(IntentKind.OTHER),
        share(IntentKind.MIXED),
        dict(sorted(missed.items())),
    )


def misses(utterances: Iterable[Utterance], labels: dict[tuple[str, str], IntentKind]) -> Iterable[str]:
    """Lines for reading the reader's errors: change-intent utterances not read as CHANGE, and other-intent ones
    read as CHANGE. Read only on the seen corpora: the held-out one is scored, never read."""
    for u in utterances:
        label, kind = labels[(u.corpus, u.intent)], goal_kind(u.text)
        if label is IntentKind.CHANGE and kind is not GoalKind.CHANGE:
            yield f"MISS  {kind.value:8} {u.intent:28} {u.text}"
        elif label is IntentKind.OTHER and kind is GoalKind.CHANGE:
            yield f"ALARM          {u.intent:28} {u.text}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--misses", choices=[DEV, SEEN], help="print the reader's errors on a seen corpus")
    parser.add_argument("--corpus", choices=[DEV, SEEN, HELDOUT], help="score this corpus only")
    args = parser.parse_args(argv)
    labels = read_labels()
    corpora = {DEV: read_banking77(), SEEN: read_clinc150(), HELDOUT: read_hwu64()}
    if args.corpus:
        corpora = {args.corpus: corpora[args.corpus]}
    if args.misses:
        for line in sorted(misses(corpora[args.misses], labels)):
            print(line)
        return 0
    scores = [score(c, us, labels, name, read) for c, us in corpora.items() for name, read in READERS.items()]
    print(
        f"{'corpus':10} {'reader':22} {'change':>6} {'other':>6} {'mixed':>6} {'recall':>7} {'f.alarm':>7} "
        f"{'mixed→C':>7}  missed as"
    )
    for s in scores:
        print(
            f"{s.corpus:10} {s.reader:22} {s.change:6} {s.other:6} {s.mixed:6} {s.recall:7.3f} "
            f"{s.false_alarm:7.3f} {s.mixed_change:7.3f}  {s.missed_as}"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in scores], indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
