"""Fault-injection suite: kill -9, racing and stalled workers, a store that goes away, concurrent
appenders, hostile inputs.

Every test is marked ``faults``. Loops run ``TABLEMGMT_FAULT_ROUNDS`` times (default 2, so `make test`
stays fast; ``TABLEMGMT_FAULT_ROUNDS=20`` for the full counts). Each test records its figures with the
``figures`` fixture; they are printed as a markdown table at the end of the run and, when
``TABLEMGMT_FAULT_REPORT`` names a file, appended to it as JSON lines (``benchmarks/fault_report.py``
reads them).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import pytest

ROUNDS = max(1, int(os.environ.get("TABLEMGMT_FAULT_ROUNDS", "2")))


@dataclass
class Figures:
    """One scenario's outcome: the counts the README quotes (all must be 0 but ``rounds``)."""

    scenario: str
    rounds: int = 0
    rows_lost: int = 0
    rows_duplicated: int = 0
    non_terminal: int = 0
    concurrent_jobs: int = 0
    late_writes_applied: int = 0
    wall_s: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


_RECORDED: list[Figures] = []


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[Figures]:
    fig = Figures(scenario=request.node.name)
    started = time.monotonic()
    yield fig
    fig.wall_s = round(time.monotonic() - started, 1)
    _RECORDED.append(fig)
    report = os.environ.get("TABLEMGMT_FAULT_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(fig)) + "\n")


def figures_table(rows: list[Figures]) -> list[str]:
    lines = [
        "| scenario | rounds | rows lost | rows duplicated | non-terminal | concurrent jobs | late writes applied | wall (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in rows:
        lines.append(
            f"| {f.scenario} | {f.rounds} | {f.rows_lost} | {f.rows_duplicated} | {f.non_terminal} "
            f"| {f.concurrent_jobs} | {f.late_writes_applied} | {f.wall_s} |"
        )
    return lines


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _RECORDED:
        terminalreporter.section(f"fault-injection figures (TABLEMGMT_FAULT_ROUNDS={ROUNDS})")
        for line in figures_table(_RECORDED):
            terminalreporter.write_line(line)
