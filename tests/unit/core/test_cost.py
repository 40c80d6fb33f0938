"""A run's cost document (core/cost.py): read whole or not at all."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.cost import COST_COLUMNS, RunCost, cost_columns, cost_of

FIGURES = {"core_seconds": 12.3456, "cpu_seconds": 8.0, "bytes_read": 1000, "bytes_written": 2000.0}


def test_a_cost_document_becomes_the_process_columns() -> None:
    cost = RunCost.parse({**FIGURES, "tasks": 7, "scope": "application"})
    assert cost == RunCost(12.346, 8.0, 1000, 2000)
    assert cost_columns({"cost": FIGURES}) == {
        "core_seconds": 12.346,
        "cpu_seconds": 8.0,
        "bytes_read": 1000,
        "bytes_written": 2000,
    }
    assert list(cost_columns({"cost": FIGURES})) == list(COST_COLUMNS)


@pytest.mark.parametrize(
    "figures",
    [
        None,
        "12",
        {},
        {**FIGURES, "bytes_read": None},
        {**FIGURES, "core_seconds": -1},
        {**FIGURES, "bytes_written": True},
        {**FIGURES, "cpu_seconds": "8"},
    ],
)
def test_a_missing_or_malformed_cost_is_no_cost_never_half_of_one(figures: object) -> None:
    assert RunCost.parse(figures) is None
    assert cost_columns({"cost": figures}) == {}


def test_a_summary_without_cost_has_none() -> None:
    assert cost_of(None) is None
    assert cost_of({"before": {}, "after": {}}) is None
    assert cost_columns({"skipped": True}) == {}
