"""What a user installs: the wheel holds the package's data files, and an optional module whose extra is
missing says which extra to install."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def _import_without(module: str, missing: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """Import ``module`` in a fresh interpreter where the ``missing`` packages cannot be imported."""
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in missing)
    code = f"import sys; {blocked}; import {module}"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(SRC)}
    )


@pytest.mark.parametrize(
    "module",
    [
        "stopwise.evals.metrics",
        "stopwise.evals.fit",
        "stopwise.evals.rulefit",
        "stopwise.evals.report",
        "stopwise.evals.html_report",
    ],
)
def test_an_eval_module_without_numpy_or_sklearn_names_the_eval_extra(module: str) -> None:
    done = _import_without(module, ("numpy", "sklearn"))
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: ")
    assert "needs the eval extra: pip install 'stopwise[eval]'" in last


@pytest.mark.parametrize(
    ("module", "missing", "extra"),
    [
        ("stopwise.integrations.pydantic_ai", ("pydantic_ai",), "pydantic-ai"),
        ("stopwise.integrations.openai_agents", ("agents",), "openai-agents"),
        ("stopwise.integrations.langgraph", ("langgraph", "langchain_core"), "langgraph"),
        ("stopwise.mcp", ("mcp",), "mcp"),
        ("stopwise.runtime.dbos", ("dbos",), "dbos"),
        ("stopwise.telemetry", ("opentelemetry",), "otel"),
    ],
)
def test_an_optional_module_without_its_extra_says_how_to_install_it(
    module: str, missing: tuple[str, ...], extra: str
) -> None:
    done = _import_without(module, missing)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.split(":")[0] in {"ImportError", "ModuleNotFoundError"}
    assert f"pip install 'stopwise[{extra}]'" in last


def test_the_eval_package_itself_imports_without_the_eval_extra() -> None:
    done = _import_without("stopwise.evals", ("numpy", "sklearn"))
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_built_wheel_holds_every_file_of_the_package(tmp_path: Path) -> None:
    """Every tracked file under src/stopwise (the guardian's JSON data, py.typed) is in the wheel: a data file
    left out installs a package that fails at import or at the first guardian decision."""
    tracked = subprocess.run(
        ["git", "ls-files", "src/stopwise"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout: the tracked files are unknown")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("stopwise-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "stopwise = stopwise.cli:main" in archive.read(entry_points).decode()
    expected = {path.removeprefix("src/") for path in tracked}
    assert expected - names == set()
    assert {"stopwise/guardian/data/rule_coefficients.json", "stopwise/guardian/data/integrity_model.json"} <= names
