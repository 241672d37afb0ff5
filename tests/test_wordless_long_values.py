"""A word anywhere in a step makes the window read for drift, however long the numbers before it: the wordless
deferral (``drift_unobserved``) must not be reachable by putting a detour's words after a long run of numbers (a
drag path, a list of coordinates, a padded reply)."""

from __future__ import annotations

import pytest

from stopwise.guardian import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.projection import ProjectedCall, ProjectedStep, Projection

DRIFT = DEFAULT_CONDITIONS.by_name["drift"]
RULES = RuleEvaluator()
GOAL = "Find a support services job in Bentonville."
IMAGE = '[{"type":"image","data":"' + "iVBORw0KGgo" * 60 + '","mimeType":"image/png"}]'
PATH = ";".join(f"{x},{x + 1}" for x in range(1000, 1400))  # a drag path as one string: 4,000 characters


def window(args: object, *, text: str = "", final: str | None = None) -> Projection:
    steps = tuple(ProjectedStep(i + 1, text, (ProjectedCall("computer", args, IMAGE, error=False),)) for i in range(2))
    return Projection(GOAL, (), steps, final=final)


@pytest.mark.parametrize(
    "projection",
    [
        window({"action": "drag", "path": PATH, "then_type": "cheap flights to Lisbon"}),
        window({"action": "left_click", "coordinate": [3, 4]}, text=" ".join(map(str, range(2000))) + " flights"),
        window({"action": "left_click", "coordinate": [3, 4]}, final="0 " * 1500 + "Cheap flights to Lisbon."),
    ],
    ids=["words after a long argument", "words after a long reply", "words after a long final answer"],
)
def test_words_after_a_long_run_of_numbers_are_read_not_deferred(projection: Projection) -> None:
    assert "unobserved" not in RULES.drift_features(projection)
    assert not RULES.answer(projection, DRIFT).defer


def test_a_long_run_of_coordinates_alone_still_defers() -> None:
    projection = window({"action": "drag", "path": PATH})
    assert RULES.drift_features(projection) == {"unobserved": 1.0}
    assert RULES.answer(projection, DRIFT).defer
