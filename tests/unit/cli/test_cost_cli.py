"""``tablemgmt cost``: the per-table, per-day rollup of what runs cost, and the cost columns of
``tablemgmt processes``, from a real SQLite store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.cli import main
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.store import Store

COST = {"core_seconds": 42.25, "cpu_seconds": 30.0, "bytes_read": 3 * 1024**2, "bytes_written": 1536}


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert (
        main(["--store-url", url, "catalog", "set", "lake", "--type", "hadoop", "--warehouse", "/tmp/w"]) == 0
    )
    assert main(["--store-url", url, "register", "lake.s.t", "--action", "rewrite-files"]) == 0
    store = Store(url)
    p, _ = store.processes.open("lake.s.t", "rewrite-files", datetime(2026, 11, 20, tzinfo=UTC))
    for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED)):
        store.processes.transition(p.id, to, expected=expected, attempt=1)
    store.processes.transition(p.id, S.SUCCESS, expected=S.RUNNING, attempt=1, summary={"cost": COST})
    store.dispose()
    return url


def test_cost_by_table_and_day(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["--store-url", url, "cost"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[:4] == ["TABLE", "RUNS", "MEASURED", "CORE-S"]
    assert row.split()[:4] == ["lake.s.t", "1", "1/1", "42.2"] and "3.0 MiB" in row and "1.5 KiB" in row

    assert main(["--store-url", url, "cost", "--by", "policy,day", "--json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)
    assert group["policy"] is None and group["day"] == datetime.now(UTC).strftime("%Y-%m-%d")
    assert (group["core_seconds"], group["bytes_read"], group["bytes_written"]) == (42.25, 3 * 1024**2, 1536)

    assert main(["--store-url", url, "processes"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert "CORE-S" in header and "READ" in header and "WRITTEN" in header
    assert "42.2" in row and "3.0 MiB" in row


def test_an_unknown_grouping_is_refused_naming_the_allowed_ones(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--store-url", url, "cost", "--by", "week"]) != 0
    err = capsys.readouterr().err
    assert "--by: week" in err and "day, policy, table, action, status" in err
