"""Fold Platt maps of a calibration file into a RuleEvaluator coefficients file (no run-time layer left).

    python evals/calibration/fold_platt.py evals/calibration/rule_coefficients.json evals/calibration/rules.json \
        --condition drift --out src/stopwise/guardian/data/rule_coefficients.json

A Platt map ``q = sigmoid(a * logit(p) + b)`` on a condition whose probability is one logistic map
``p = sigmoid(z)`` is the logistic map ``sigmoid(a * z + b)``: weights times ``a``, bias ``a * bias + b``. For drift
the map gives p(aligned) and the condition fires with ``1 - p(aligned)`` (levels 0-1, see ``RuleEvaluator``), so
the folded map is ``sigmoid(a * z - b)``. Only maps fitted with ``platt`` and on the condition's own ``fires_on``
are folded; the file's ``version`` gets ``+platt`` and ``fitted`` says what was folded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

FIRES_ON = {
    "integrity": ["yes"],
    "stagnation": ["yes"],
    "infeasible": ["yes"],
    "goal_reached": ["yes"],
    "drift": ["0", "1"],
}


def fold(coefficients: dict, calibration: dict, conditions: list[str]) -> dict:
    out = json.loads(json.dumps(coefficients))
    for name in conditions:
        m = calibration["conditions"][name]
        if m["method"] != "platt" or m["fires_on"] != FIRES_ON[name]:
            raise SystemExit(f"{name}: only a Platt map on {FIRES_ON[name]} can be folded, got {m['method']}")
        a, b = float(m["a"]), float(m["b"])
        if name == "drift":
            b = -b  # the map's p is p(aligned) = 1 - p(fires)
        cond = out[name]
        cond["weights"] = {k: round(a * w, 4) for k, w in cond["weights"].items()}
        cond["bias"] = round(a * cond["bias"] + b, 4)
        fitted = out.setdefault("fitted", {}).setdefault(name, {})
        fitted["platt_folded"] = {
            "a": round(a, 4),
            "b": round(float(m["b"]), 4),
            "from": calibration["version"],
            "heldout": m.get("heldout", {}),
        }
    digest = hashlib.sha256(json.dumps({k: out[k] for k in conditions}, sort_keys=True).encode()).hexdigest()[:4]
    out["version"] = f"{coefficients['version']}+p{digest}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("coefficients")
    parser.add_argument("calibration")
    parser.add_argument("--condition", action="append", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    coefficients = json.loads(Path(args.coefficients).read_text(encoding="utf-8"))
    calibration = json.loads(Path(args.calibration).read_text(encoding="utf-8"))
    data = fold(coefficients, calibration, args.condition)
    Path(args.out).write_text(json.dumps(data, indent=1 if "src" in args.out else 2) + "\n", encoding="utf-8")
    print(f"wrote {args.out} (version {data['version']})")


if __name__ == "__main__":
    main()
