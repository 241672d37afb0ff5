"""The architecture as rules the code must keep (docs/architecture.md): one writer of a run's status and reason,
and the deprecated names of this release still importable, with a warning that names their replacement."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "stopwise"

# A run's status and reason are written only by apply_decision; the stores rebuild records from their rows.
_ALLOWED = {("stop/decision.py", "apply_decision")}
_DESERIALISERS = "store/"
_FIELDS = {"status", "completion_reason"}


def _writes(tree: ast.AST) -> list[tuple[str, int]]:
    """(enclosing function, line) of every place that sets a run record's status or completion reason."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call):
                callee = child.func.attr if isinstance(child.func, ast.Attribute) else getattr(child.func, "id", "")
                if callee in ("replace", "RunRecord") and any(k.arg in _FIELDS for k in child.keywords):
                    found.append((func, child.lineno))
                if callee == "RunRecord" and len(child.args) >= 4:  # status is RunRecord's fourth field
                    found.append((func, child.lineno))
            if isinstance(child, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for t in targets:
                    is_self = isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                    if isinstance(t, ast.Attribute) and t.attr in _FIELDS and not is_self:
                        found.append((func, child.lineno))
            visit(child, name)

    visit(tree, "<module>")
    return found


def test_only_apply_decision_writes_a_runs_status_or_reason() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(_DESERIALISERS):
            continue
        for func, line in _writes(ast.parse(path.read_text(encoding="utf-8"))):
            if (rel, func) not in _ALLOWED:
                offenders.append(f"{rel}:{line} in {func}()")
    assert not offenders, "a run's status or reason is written outside apply_decision:\n" + "\n".join(offenders)


def test_the_scan_finds_a_status_write_where_there_is_one() -> None:
    # The rule above must be able to fail: a write of each shape is found.
    code = (
        "def f(run):\n"
        "    a = replace(run, status=1)\n"
        "    b = RunRecord('r', 's', 'a', 'running')\n"
        "    run.completion_reason = None\n"
    )
    assert [line for _, line in _writes(ast.parse(code))] == [2, 3, 4]


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("stopwise", "Decision", "StopDecision"),
        ("stopwise", "StepSignals", "StepSignals"),
        ("stopwise", "resolve", "resolve"),
        ("stopwise", "ModelRequest", "ModelRequest"),
        ("stopwise", "StepConflict", "StepConflict"),
        ("stopwise", "RunRecord", "RunRecord"),
        ("stopwise.stop", "Decision", "StopDecision"),
        ("stopwise.stop.decision", "Decision", "StopDecision"),
        ("stopwise.approvals", "Decision", "ApprovalDecision"),
        ("stopwise.guardian", "Decision", "GuardianDecision"),
        ("stopwise.guardian", "Outcome", "GuardianOutcome"),
        ("stopwise.guardian.records", "Decision", "GuardianDecision"),
        ("stopwise.guardian.conditions", "Outcome", "GuardianOutcome"),
        ("stopwise.stop.guard", "Verdict", "StopGuardVerdict"),
        ("stopwise.stop.guard", "GuardOutcome", "StopGuardOutcome"),
        ("stopwise.guardrails.verdicts", "Verdict", "GuardrailVerdict"),
    ],
)
def test_a_renamed_or_moved_name_imports_for_one_release_with_a_warning(module: str, old: str, new: str) -> None:
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=new):
        value = getattr(mod, old)
    assert value is not None
    assert old not in getattr(mod, "__all__", ())


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import stopwise

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'Nonsense'"):
            stopwise.Nonsense  # noqa: B018


def test_import_stopwise_leaves_the_system_one_client_and_httpx_unloaded() -> None:
    import subprocess
    import sys

    names = ("httpx", "stopwise.guardian.evaluators.systemone")
    code = f"import stopwise, sys; print(sorted(m for m in {names!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


_LAZY = (
    "stopwise.guardian.evaluators.rule",
    "stopwise.guardian.evaluators.judge",
    "stopwise.guardrails.builtins",
    "stopwise.models.openai",
    "stopwise.models.anthropic",
    "stopwise.store.sqlite",
    "sqlite3",
    # pydantic's model machinery (and its plugin loader, which reads every installed distribution's metadata) is
    # loaded by the first tool, output type or message encoding, not by the import: it was a third of its time.
    "pydantic.main",
    "pydantic.plugin._loader",
    "docstring_parser",
)


def test_import_stopwise_leaves_evaluators_builtins_adapters_sqlite_and_pydantic_models_unloaded() -> None:
    import subprocess
    import sys

    code = f"import stopwise, sys; print(sorted(m for m in {_LAZY!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


@pytest.mark.parametrize(
    "package",
    [
        "stopwise",
        "stopwise.guardian",
        "stopwise.guardian.evaluators",
        "stopwise.guardrails",
        "stopwise.models",
        "stopwise.store",
    ],
)
def test_every_exported_name_of_a_lazy_package_imports_and_is_its_modules_own_object(package: str) -> None:
    import subprocess
    import sys

    # A fresh process: nothing imported before decides what is already loaded.
    code = (
        "import importlib, sys, warnings\n"
        "warnings.simplefilter('error')\n"
        f"mod = importlib.import_module({package!r})\n"
        "ns = {}\n"
        f"exec('from {package} import *', ns)\n"
        "for name in mod.__all__:\n"
        "    value = getattr(mod, name)\n"
        "    assert ns[name] is value, name\n"
        "    home = getattr(value, '__module__', None)\n"
        "    if home and home.startswith('stopwise') and hasattr(sys.modules[home], name):\n"
        "        assert getattr(sys.modules[home], name) is value, (name, home)\n"
        "print(len(mod.__all__))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(importlib.import_module(package).__all__)
