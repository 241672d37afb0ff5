"""Refit the RuleEvaluator's risk tables only, and write them into both coefficients files.

    python evals/calibration/fit_risk.py            # from evals/ data, in place

The risk section (declared tables, name hints, hinted tables) is fitted by ``stopwise.evals.rulefit`` on the
train split's risk records of the scripted dev set (``evals/data/devset.jsonl``) and of the real set
(``evals/data/realset.jsonl``: tools of public MCP servers as their authors annotated them), starting from the
hand-set tables of version ``h1`` (the prior, worth ``prior_weight`` records) with the name hints of
``HINTS.json`` beside this script. Only the ``risk`` section, its ``fitted`` entries and the version change: the
logistic maps of the other conditions are fitted by their own commands (see README.md here), and this script
leaves their text as it is.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from stopwise.evals.rulefit import fit_rule_coefficients
from stopwise.evals.traces import read_traces

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
H1 = "e22ac20"
"""The commit holding the hand-set coefficients file (version h1): the prior of every refit."""
FILES = {
    ROOT / "evals" / "calibration" / "rule_coefficients.json": 2,
    ROOT / "src" / "stopwise" / "guardian" / "data" / "rule_coefficients.json": 1,
}
TRACES = [ROOT / "evals" / "data" / "devset.jsonl", ROOT / "evals" / "data" / "realset.jsonl"]


def replace_key(text: str, key: str, value: Any, indent: int) -> str:
    """``text`` with the value of the top-level ``key`` replaced, every other byte left as it was."""
    m = re.search(r'^( *)"' + re.escape(key) + r'": ', text, flags=re.M)
    if m is None or len(m.group(1)) != indent:
        raise KeyError(f"no top-level {key!r}")
    _, end = json.JSONDecoder().raw_decode(text, m.end())
    return text[: m.end()] + json.dumps(value, indent=indent).replace("\n", "\n" + " " * indent) + text[end:]


def main() -> int:
    h1 = json.loads(
        subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{H1}:src/stopwise/guardian/data/rule_coefficients.json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    h1["risk"]["name_hints"] = json.loads((HERE / "HINTS.json").read_text(encoding="utf-8"))
    base = HERE / ".risk_base.json"
    base.write_text(json.dumps(h1), encoding="utf-8")
    try:
        records = [r for path in TRACES for r in read_traces(path).records if r.condition == "risk"]
        fitted = fit_rule_coefficients(
            [r for r in records if r.split == "train"], base=base, source="risk records (train split)"
        )
    finally:
        base.unlink()
    risk = fitted["risk"]
    notes = {k: v for k, v in fitted["fitted"].items() if k.startswith("risk.")}
    digest = hashlib.sha256(json.dumps(risk, sort_keys=True).encode()).hexdigest()[:4]
    for path, indent in FILES.items():
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        version = re.sub(r"\+r[0-9a-f]{4}$", "", data["version"]) + f"+r{digest}"
        others = {k: v for k, v in data["fitted"].items() if not k.startswith("risk.")}
        text = replace_key(text, "risk", risk, indent)
        text = replace_key(text, "fitted", others | notes, indent)
        text = replace_key(text, "version", version, indent)
        path.write_text(text, encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {version}")
    for key, note in notes.items():
        print(f"  {key}: {note['records']} records -> {risk[key.split('.')[1]][key.split('.')[2]]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
