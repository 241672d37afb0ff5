"""The eval harness: labelled traces, per-condition calibration metrics, calibration maps, the regression gate.

"A threshold on an unmeasured probability is a guess": this package measures the guardian's evaluators on
labelled states, so that "the model says 0.83" becomes "on our traces, 0.83 is right about 83% of the time".

Importable from here, with the core dependencies only:

- traces: ``TraceRecord``, ``TraceSet``, ``LineProblem``, ``TraceFormatError``, ``read_traces``,
  ``write_traces``, ``projection_to_data``, ``projection_from_data``, ``parse_projection_text``,
  ``text_projection``;
- the learning path: ``export_labels`` (escalation resolutions in a store, as trace records);
- running an evaluator: ``predict`` (async), ``predict_sync``, ``Prediction``, ``Predictions``;
- calibration at run time: ``CalibratedEvaluator``, ``Calibration``, ``CalibrationMap``, ``load_calibration``;
- the design's residual risks, from their modules: ``stopwise.evals.probe`` (counterfactual probing),
  ``stopwise.evals.correlated`` (the guardian's errors beside the actor's), ``stopwise.evals.near_miss`` (near
  misses in a trace set).

The rest needs the ``eval`` extra (numpy, scikit-learn; ``pip install 'stopwise[eval]'``) and is imported from
its module: ``stopwise.evals.metrics`` (ECE, MCE, Brier, AUROC, reliability bins, the cost-minimising
threshold), ``stopwise.evals.fit`` (Platt and isotonic fits), ``stopwise.evals.report`` (the report and the
gate), ``stopwise.evals.html_report`` and ``stopwise.evals.rulefit`` (refitting the ``RuleEvaluator``'s maps).
The command line is ``stopwise eval``; see docs/evals.md.
"""

from stopwise.evals.calibration import CalibratedEvaluator, Calibration, CalibrationMap, load_calibration
from stopwise.evals.export import export_labels
from stopwise.evals.run import Prediction, Predictions, predict, predict_sync
from stopwise.evals.traces import (
    LineProblem,
    TraceFormatError,
    TraceRecord,
    TraceSet,
    parse_projection_text,
    projection_from_data,
    projection_to_data,
    read_traces,
    text_projection,
    write_traces,
)

__all__ = [
    # traces
    "LineProblem",
    "TraceFormatError",
    "TraceRecord",
    "TraceSet",
    "parse_projection_text",
    "projection_from_data",
    "projection_to_data",
    "read_traces",
    "text_projection",
    "write_traces",
    # the learning path
    "export_labels",
    # running an evaluator
    "Prediction",
    "Predictions",
    "predict",
    "predict_sync",
    # calibration at run time
    "CalibratedEvaluator",
    "Calibration",
    "CalibrationMap",
    "load_calibration",
]
