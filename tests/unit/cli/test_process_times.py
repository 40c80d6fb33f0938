"""``tablemgmt processes`` / ``process N`` show a process's times by the one definition the REST API
and the History tab use (``services.processes.timings``), the lease wait apart from the queue wait."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.cli import main
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.services.processes import timings
from airflow_tablemgmt.store import Store


def test_the_cli_shows_lease_and_queue_wait_as_rest_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert (
        main(["--store-url", url, "catalog", "set", "lake", "--type", "hadoop", "--warehouse", "/tmp/w"]) == 0
    )
    assert main(["--store-url", url, "register", "lake.s.t", "--action", "rewrite-files"]) == 0
    store = Store(url)
    p, _ = store.processes.open("lake.s.t", "rewrite-files", datetime(2026, 11, 20, tzinfo=UTC))
    store.processes.lease_taken(p.id, 1)
    for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED), (S.SUCCESS, S.RUNNING)):
        store.processes.transition(
            p.id,
            to,
            expected=expected,
            attempt=1,
            **({"summary": {"duration_seconds": 1.5}} if to == S.SUCCESS else {}),
        )
    done = store.processes.get(p.id)
    store.dispose()
    capsys.readouterr()

    assert main(["--store-url", url, "process", str(p.id), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["timings"] == timings(done) and shown["timings"]["lease_wait_s"] is not None
    assert shown["lease_acquired_at"] == done.lease_acquired_at.isoformat()

    assert main(["--store-url", url, "processes"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert "LEASE WAIT" in header and "QUEUE WAIT" in header and "STARTED" in header and "FINISHED" in header
    assert done.started_at is not None and done.started_at.isoformat(timespec="seconds") in row
    assert f"{timings(done)['lease_wait_s']:.1f}s" in row and "1.5s" in row
