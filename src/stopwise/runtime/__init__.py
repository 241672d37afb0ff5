"""Where runs execute: the local asyncio ``Runner`` (a DBOS runtime comes with the ``dbos`` extra).

Also the API for runtime authors, who drive run legs themselves (the DBOS runtime does): the step signals, the
resolver and its decision, the function that writes a decision to the run record, the leg driver, and the one
``RunResult`` builder. Applications do not need these.
"""

from stopwise._loop import Leg, drive
from stopwise._results import result_from_log, result_of
from stopwise.runtime.local import ExpirySweep, Runner, SessionBusy, SkippedExpiry
from stopwise.stop.decision import Action, StepSignals, StopDecision, apply_decision, resolve

__all__ = [
    "ExpirySweep",
    "Runner",
    "SessionBusy",
    "SkippedExpiry",
    # for runtime authors
    "Action",
    "Leg",
    "StepSignals",
    "StopDecision",
    "apply_decision",
    "drive",
    "resolve",
    "result_from_log",
    "result_of",
]
