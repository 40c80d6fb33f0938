"""Fault-injection suite: kill -9, racing and stalled workers, a store that goes away, concurrent
appenders, hostile inputs.

Every test is marked ``faults``. Loops run ``TABLEMGMT_FAULT_ROUNDS`` times (default 2, so `make test`
stays fast; ``TABLEMGMT_FAULT_ROUNDS=20`` for the full counts). Each test records its figures with the
``figures`` fixture; they travel with the test's report (a user property, so they reach the main
process when pytest-xdist runs the test elsewhere), are printed as a markdown table at the end of the
run (tests/conftest.py) and, when ``TABLEMGMT_FAULT_REPORT`` names a file, appended to it as JSON lines
(``benchmarks/fault_report.py`` reads them).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from airflow_tablemgmt.store import Store
from tests.faults.proxy import TcpProxy
from tests.support.postgres import PG_URL, admin_engine

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


#: The user property a test's figures travel under (tests/conftest.py collects them from the reports).
FIGURES_PROPERTY = "tablemgmt_fault_figures"


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[Figures]:
    fig = Figures(scenario=request.node.name)
    started = time.monotonic()
    yield fig
    fig.wall_s = round(time.monotonic() - started, 1)
    request.node.user_properties.append((FIGURES_PROPERTY, asdict(fig)))
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


@pytest.fixture(autouse=True)
def _result_dir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own result files (lifecycle/results.py): a process id repeats across test schemas."""
    monkeypatch.setenv("TABLEMGMT_RESULT_DIR", str(tmp_path / "results"))


# -- PostgreSQL, directly and through a proxy the test can cut ---------------------------------


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[Engine]:
    yield from admin_engine("the fault suite")


@dataclass
class PgStores:
    """One fresh schema; ``direct()`` and ``proxied()`` open independent stores on it."""

    schema: str
    proxy: TcpProxy
    _opened: list[Store] = field(default_factory=list)

    def _open(self, url: str) -> Store:
        options = f"-csearch_path={self.schema}"
        store = Store(url, engine_kwargs={"connect_args": {"options": options, "connect_timeout": 3}})
        self._opened.append(store)
        return store

    def direct(self) -> Store:
        return self._open(PG_URL)

    def proxied(self) -> Store:
        return self._open(self.proxied_url)

    @property
    def proxied_url(self) -> str:
        return (
            make_url(PG_URL).set(host="127.0.0.1", port=self.proxy.port).render_as_string(hide_password=False)
        )


@pytest.fixture
def pg(pg_admin: Engine) -> Iterator[PgStores]:
    schema = f"tms_f_{uuid.uuid4().hex[:16]}"
    with pg_admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(PG_URL)
    with TcpProxy((url.host or "127.0.0.1", url.port or 5432)) as proxy:
        stores = PgStores(schema, proxy)
        try:
            yield stores
        finally:
            proxy.restore()
            for store in stores._opened:
                store.dispose()
            with pg_admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
