"""``stopwise eval``: what the command does once ``stopwise.cli`` has parsed its arguments.

Exit codes: 0 done (and the gate, if asked, passed); 1 the gate found a regression, or there was nothing to
evaluate; 2 a usage error: an unknown condition, a missing option, an unreadable or (with ``--strict``)
malformed trace file, a missing ``eval`` extra.

numpy and scikit-learn are imported here only, and only when the command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from stopwise._terminal import terminal_safe
from stopwise.errors import ConfigError, StoreError, UnreadableEntry
from stopwise.evals._extra import EXTRA_HINT
from stopwise.evals.calibration import CalibratedEvaluator, Calibration, load_calibration
from stopwise.evals.export import export_labels
from stopwise.evals.run import Predictions, predict_sync
from stopwise.evals.traces import TraceFormatError, TraceRecord, read_traces, write_traces
from stopwise.guardian.answers import Evaluator
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, QuestionSet

__all__ = ["EVALUATORS", "run"]

EVALUATORS = ("rule", "systemone", "judge")
"""The evaluator names ``--evaluator`` takes."""
ENV_BASE_URL = "STOPWISE_EVAL_BASE_URL"
ENV_MODEL = "STOPWISE_EVAL_MODEL"

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A problem with what was asked; one line on stderr, exit code 2."""


def run(args: argparse.Namespace) -> int:
    """Run the command; returns its exit code. Errors are printed as one line on stderr."""
    try:
        return _run(args)
    except (UsageError, ConfigError, StoreError, OSError, sqlite3.Error) as exc:
        print(f"stopwise eval: error: {terminal_safe(str(exc))}", file=sys.stderr)
        return EXIT_USAGE


def _require(*modules: str) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise UsageError(f"this needs {name}, which is not installed: {EXTRA_HINT}") from None


def _run(args: argparse.Namespace) -> int:
    questions = DEFAULT_CONDITIONS
    wanted = list(dict.fromkeys(args.condition or ()))
    unknown = [c for c in wanted if c not in questions.by_name]
    if unknown:
        valid = ", ".join(questions.by_name)
        raise UsageError(f"unknown condition {', '.join(map(repr, unknown))}; valid conditions: {valid}")
    if args.calibrate and args.calibration:
        raise UsageError("--calibrate fits a new calibration, --calibration applies one: use one of them")
    if args.calibrate and args.split == "train":
        raise UsageError("--calibrate fits on the train split and reports on the test split; drop --split train")
    if args.tolerance < 0:
        raise UsageError(f"--tolerance must be >= 0, got {args.tolerance}")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {args.concurrency}")

    with _collector_paused():
        records = _read(args.traces, strict=args.strict, progress=args.progress)
    # The records live until the end of the command and hold no cycles: frozen, every later collection skips
    # them (otherwise each full collection walks the whole trace set: seconds at 100,000 records).
    gc.freeze()
    if args.export:
        count = write_traces(args.export, records)
        print(f"wrote {count} records to {args.export}")
        return EXIT_OK
    # The metrics need numpy, a calibration fit scikit-learn: say so before a long evaluator run, not after.
    _require("numpy", *(["sklearn"] if args.calibrate else []))

    if wanted:
        records = [r for r in records if r.condition in wanted]
    split = "test" if args.calibrate else args.split
    if split != "all" and not args.calibrate:
        records = [r for r in records if r.split == split]
    if not records:
        print("stopwise eval: nothing to evaluate (no records of the conditions and split asked for)", file=sys.stderr)
        return EXIT_FAILED

    evaluator = _evaluator(args)
    calibration: Calibration | None = None
    if args.calibration:
        calibration = load_calibration(args.calibration)
        evaluator = CalibratedEvaluator(evaluator, calibration)
    if args.calibrate:
        records = [r for r in records if r.split in ("train", "test")]
    predictions = _predict(evaluator, records, questions, args)
    return _report(args, predictions, questions, split, calibration, evaluator)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block. The command owns its process, so it may (the library
    never touches the collector): what it builds in bulk (parsed traces, projections, predictions) makes no
    reference cycles, and the collector would walk that growing heap again and again, a third or more of the
    run at 100,000 records."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _read(paths: Sequence[str], *, strict: bool, progress: bool | None = None) -> list[TraceRecord]:
    records: list[TraceRecord] = []
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"{path}: no such file")
        if _is_sqlite(p):
            records.extend(asyncio.run(_export(p, progress)))
            continue
        try:
            traces = read_traces(p, strict=strict)
        except TraceFormatError as exc:
            for problem in exc.problems:
                print(f"{terminal_safe(str(problem))} (--strict: stopping)", file=sys.stderr)
            raise UsageError(f"{path}: {len(exc.problems)} malformed line(s)") from None
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}: not a UTF-8 JSONL file ({exc.reason})") from None
        if traces.problems and not traces.records:
            # Not one line read: not a trace file at all (the other commands say the same of a non-database).
            raise UsageError(f"{path}: file is not a database written by stopwise nor JSONL traces")
        for problem in traces.problems:
            print(f"{terminal_safe(str(problem))} (skipped)", file=sys.stderr)
        records.extend(traces.records)
    return records


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


async def _export(path: Path, progress: bool | None) -> list[TraceRecord]:
    from stopwise._progress import ProgressBar
    from stopwise.store.sqlite import SQLiteStore

    store = SQLiteStore(path)
    bar = ProgressBar(f"reading {path.name}", enabled=progress)
    try:
        return await export_labels(store, on_unreadable=_skipped, progress=bar)
    finally:
        bar.close()
        await store.close()


def _skipped(exc: UnreadableEntry) -> None:
    print(f"stopwise eval: notice: {terminal_safe(str(exc))}; the session is skipped", file=sys.stderr)


def _evaluator(args: argparse.Namespace) -> Evaluator:
    base_url = args.base_url or os.environ.get(ENV_BASE_URL) or None
    model = args.model or os.environ.get(ENV_MODEL) or None
    if args.evaluator == "rule":
        from stopwise.guardian.evaluators.rule import RuleEvaluator

        rule: Evaluator = RuleEvaluator(coefficients=args.rule_coefficients)
        return rule
    if args.evaluator == "systemone":
        from stopwise.guardian.evaluators.systemone import SystemOneEvaluator

        timeout = args.timeout
        if base_url is None:
            # TypeSafe's API by default, its key from TYPESAFE_API_KEY (a missing key is a ConfigError naming it).
            return SystemOneEvaluator.typesafe(model=model or "jev-latest", timeout=timeout)
        if model is None:
            raise UsageError(f"--evaluator systemone with --base-url needs --model (or {ENV_MODEL})")
        return SystemOneEvaluator(
            base_url=base_url, model=model, path=args.path, api_key_env=args.api_key_env, timeout=timeout
        )
    if args.evaluator == "judge":
        from stopwise.guardian.evaluators.judge import JudgeEvaluator
        from stopwise.models import resolve_model

        if model is None:
            raise UsageError(
                f"--evaluator judge needs --model (or {ENV_MODEL}): openai:MODEL, anthropic:MODEL, "
                "or a model name with --base-url for an OpenAI-compatible server"
            )
        spec = f"openai-compatible:{base_url}#{model}" if base_url else model
        return JudgeEvaluator(resolve_model(spec))
    raise UsageError(f"unknown evaluator {args.evaluator!r}; valid evaluators: {', '.join(EVALUATORS)}")


def _predict(evaluator: Evaluator, records: list[TraceRecord], questions: QuestionSet, args: Any) -> Predictions:
    from stopwise._progress import ProgressBar

    bar = ProgressBar("stopwise eval", enabled=args.progress)
    try:
        rules = args.evaluator == "rule"
        # A model evaluator's calls (clients, tasks, tracebacks) may make cycles: collected as ever. The per-call
        # limit only for model evaluators: the rule evaluator does not wait on anything.
        with _collector_paused() if rules else nullcontext():
            return predict_sync(
                evaluator,
                records,
                questions,
                concurrency=args.concurrency,
                call_timeout=None if rules else args.timeout,
                progress=bar,
            )
    finally:
        bar.close()


def _report(
    args: argparse.Namespace,
    predictions: Predictions,
    questions: QuestionSet,
    split: str,
    calibration: Calibration | None,
    evaluator: Evaluator,
) -> int:
    from stopwise.evals.report import EvalReport, build_report, compare, render_text

    traces = [str(t) for t in args.traces]
    report: EvalReport
    if args.calibrate:
        from stopwise.evals.fit import fit_calibration
        from stopwise.evals.run import Predictions as P

        train = [x for x in predictions.items if x.record.split == "train"]
        test = P(
            predictions.evaluator,
            predictions.model_version,
            tuple(x for x in predictions.items if x.record.split == "test"),
            tuple(s for s in predictions.skipped if s.record.split == "test"),
            predictions.calls,
            predictions.model_versions,
        )
        if not train:
            raise UsageError("--calibrate needs records in the train split to fit on")
        fitted = fit_calibration(
            train,
            method=args.method,
            evaluator=predictions.evaluator,
            model_version=predictions.model_version,
            question_set_version=questions.version,
            fitted_on={"traces": traces, "split": "train", "conditions": sorted({x.condition.name for x in train})},
        )
        report = build_report(
            test,
            questions,
            split="test",
            traces=traces,
            calibration=fitted.version,
            transform=lambda name, p: fitted.maps[name](p) if name in fitted.maps else p,
            before=True,
        )
        fitted = _with_heldout(fitted, report)
        fitted.save(args.calibrate)
    else:
        report = build_report(
            predictions,
            questions,
            split=split,
            traces=traces,
            calibration=None if calibration is None else calibration.version,
        )
    render_text(report, sys.stdout)
    if args.calibrate:
        print(file=sys.stdout)
        print(f"calibration fitted on the train split (ECE before -> after on the test split): {args.calibrate}")
    data = report.to_data()
    data.update(_residual_risks(args, predictions, questions, evaluator))
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if args.html:
        from stopwise.evals.html_report import render_html

        Path(args.html).write_text(render_html(report), encoding="utf-8")
    if not report.conditions:
        print("stopwise eval: no condition had a record to evaluate", file=sys.stderr)
        return EXIT_FAILED
    if args.baseline:
        try:
            baseline = json.loads(Path(args.baseline).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UsageError(f"--baseline {args.baseline}: not JSON: {exc}") from None
        if not isinstance(baseline, dict) or not isinstance(baseline.get("conditions"), dict):
            raise UsageError(f"--baseline {args.baseline}: not an eval report (written by stopwise eval --json)")
        regressions, notes = compare(data, baseline, args.tolerance, only=args.condition or ())
        for note in notes:
            print(f"gate: note: {note}")
        if regressions:
            print(
                f"gate: FAILED: {len(regressions)} regression(s) against {args.baseline} "
                f"(tolerance {args.tolerance:g}):",
                file=sys.stderr,
            )
            for r in regressions:
                print(f"  {r}", file=sys.stderr)
            return EXIT_FAILED
        print(f"gate: OK: no condition worse than {args.baseline} beyond tolerance {args.tolerance:g}")
    return EXIT_OK


def _residual_risks(
    args: argparse.Namespace, predictions: Predictions, questions: QuestionSet, evaluator: Evaluator
) -> dict[str, Any]:
    """The seed's residual risks, each when asked: ``--near-misses`` (the trace set's near misses per condition),
    ``--errors`` (the guardian's errors beside the actor's), ``--probe`` (counterfactual probing). Printed after
    the report; returned as the JSON report's extra keys."""
    out: dict[str, Any] = {}
    records = [x.record for x in predictions.items]
    if args.near_misses:
        from stopwise.evals.near_miss import near_miss_shares

        shares = near_miss_shares(records, questions)
        print("\nnear misses (tagged in the records' kind), per condition:")
        for s in shares:
            of_negatives = "n/a" if s.share_of_negatives is None else f"{s.share_of_negatives:.0%}"
            print(f"  {s.condition}: {s.near_misses} of {s.records} records, {of_negatives} of the negatives")
        out["near_misses"] = [s.to_data() for s in shares]
    if args.errors:
        from stopwise.evals.correlated import error_overlap
        from stopwise.evals.correlated import render_text as render_overlap

        overlap = error_overlap(predictions.items)
        print()
        render_overlap(overlap, sys.stdout)
        out["correlated_errors"] = [r.to_data() for r in overlap]
    if args.probe:
        from stopwise.evals.probe import probe
        from stopwise.evals.probe import render_text as render_probe

        report = asyncio.run(
            probe(
                evaluator,
                records,
                questions,
                concurrency=args.concurrency,
                call_timeout=None if args.evaluator == "rule" else args.timeout,
            )
        )
        print()
        render_probe(report, sys.stdout)
        out["probe"] = report.to_data()
    return out


def _with_heldout(calibration: Calibration, report: Any) -> Calibration:
    """The calibration with each map's held-out figures in its ``info``: what the file was worth when fitted."""
    from stopwise.evals.calibration import CalibrationMap

    before = report.before_calibration or {}
    maps = {}
    for name, m in calibration.maps.items():
        after = report.conditions.get(name)
        info = dict(m.info)
        if after is not None:
            info["heldout"] = {
                "split": "test",
                "n": after.n,
                "ece_before": None if name not in before else before[name].ece,
                "ece_after": after.ece,
                "auroc": after.auroc,
            }
        maps[name] = CalibrationMap(m.method, m.fires_on, m.a, m.b, m.eps, m.x, m.y, info)
    return Calibration(
        maps, calibration.evaluator, calibration.model_version, calibration.question_set_version, calibration.fitted_on
    )
