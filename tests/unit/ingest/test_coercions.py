"""``--coerce``: the rules a user may accept (issue 18 item 10), and how accepted coercions are
counted from the query's progress reports. Pure: no Spark."""

from __future__ import annotations

from typing import Any

import pytest

from logstore_cli.cli.ingest import Coerced, coerced_line
from logstore_cli.errors import InvalidInputError
from logstore_cli.ingest import plan

pytestmark = pytest.mark.unit


def test_each_rule_by_name_comma_separated_repeated_or_all() -> None:
    assert plan.parse_coercions(None) == frozenset()
    assert plan.parse_coercions(["decimal-round, Bool-To-String", "duplicate-key"]) == {
        "decimal-round", "bool-to-string", "duplicate-key",
    }  # fmt: skip
    assert plan.parse_coercions(["all"]) == frozenset(plan.COERCIONS)
    for rule in plan.COERCIONS:
        assert plan.parse_coercions([rule]) == {rule}
    assert set(plan.COERCIONS) == {
        "invalid-utf8", "lone-surrogate", "decimal-round", "number-to-string", "bool-to-string",
        "json-to-string", "duplicate-key",
    }  # fmt: skip


@pytest.mark.parametrize("value", ["round", "decimal-round,", "decimal-round,,x", ""])
def test_an_unknown_rule_is_refused_with_the_valid_ones(value: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        plan.parse_coercions([value])
    assert "--coerce" in caught.value.message
    assert caught.value.hint is not None
    assert all(rule in caught.value.hint for rule in plan.COERCIONS) and "all" in caught.value.hint


def _progress(batch: int, counts: dict[str, int] | None) -> dict[str, Any]:
    """A progress report as its JSON has it (``StreamingQueryProgress.json``)."""
    metrics = {} if counts is None else {plan.COERCION_METRICS: counts}
    return {"batchId": batch, "observedMetrics": metrics}


def test_accepted_coercions_are_counted_once_per_batch() -> None:
    coerced = Coerced()
    first = [_progress(0, {"decimal-round": 2, "bool-to-string": 0}), _progress(1, None)]
    assert coerced.take(first) == [(0, {"decimal-round": 2})]
    assert coerced.last == 1  # the next look reads the reports after it only
    # The same reports read again (the query keeps its last 100) count nothing twice.
    again = [*first, _progress(2, {"decimal-round": 1, "duplicate-key": 3})]
    assert coerced.take(again) == [(2, {"decimal-round": 1, "duplicate-key": 3})]
    assert coerced.totals == {"decimal-round": 3, "duplicate-key": 3}
    assert coerced_line(coerced.totals) == "decimal-round 3, duplicate-key 3"
