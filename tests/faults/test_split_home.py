"""Recovery without shared storage (issue 36, item 4): a worker dies after its job committed and
before it recorded anything; the retry runs on another host -- its own ``$AIRFLOW_HOME``, so no result
file of the first worker is there -- and must record the committed result instead of running the job
again, on SQLite and on PostgreSQL.

Worker A (``worker_main.py``: real spark-submit, local[2], a 6 s lease) compacts a real table and is
killed with -9 the moment its job returns committed. Worker B, with another ``$AIRFLOW_HOME`` and
result directory, retries once A's row is stale (again while A's lease holds, as the operator defers).
The commit carries its process attempt in the snapshot summary (``spark/job/commit_mark.py``); B reads
it from the table (``lifecycle/table_marks.py``).

Counted: rounds, duplicated jobs (B ran the job instead of recording A's), lost records (the process
not SUCCESS), rows lost or duplicated in the table, rows left non-terminal. Before the change B ran the
job again in every round.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.iceberg_reads import read_state
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.test_kill9 import WORKER, env, make_tables, wait_for

pytestmark = [
    pytest.mark.faults,
    pytest.mark.on_demand(
        reason="a real table and compaction per round and store, ~2-3 min each under load; CI "
        "runs unit/lifecycle/test_table_marks.py (the marks read from Iceberg and Delta "
        "metadata)"
    ),
]

CATALOG = "kill"
ACTION = "rewrite-files"
T0 = datetime(2026, 7, 1, tzinfo=UTC)


def _register(store: Any, warehouse: Path, tid: str) -> None:
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec

    catalog, namespace, name = tid.split(".")
    store.catalogs.upsert(CatalogSpec(name=catalog, warehouse=str(warehouse)), Owner.STORE)
    actions = {ACTION: {"min-input-files": 2}}
    store.tables.upsert(
        TableSpec(catalog=catalog, namespace=namespace, name=name, actions=actions), Owner.STORE
    )


def _home(tmp_path: Path, who: str) -> dict[str, str]:
    home = tmp_path / f"home-{who}"
    home.mkdir(exist_ok=True)
    return {"AIRFLOW_HOME": str(home), "TABLEMGMT_RESULT_DIR": str(home / "tablemgmt" / "results")}


def _round(tmp_path: Path, url: str, store: Any, warehouse: Path, tid: str, r: int) -> dict[str, Any]:
    instant = (T0 + timedelta(days=r)).isoformat()
    meta_dir = warehouse / "db" / tid.split(".")[-1] / "metadata"
    before = read_state(meta_dir)
    cmd = [sys.executable, str(WORKER), url, tid, ACTION, instant]
    log = tmp_path / f"{tid}-a.log"
    with log.open("w") as err:
        a = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, timeout=600,
                           env={**env(), **_home(tmp_path, "a"), "TABLEMGMT_FAULT_DIE_AFTER_COMMIT": "1"})  # fmt: skip
    assert a.returncode == -9, (
        f"worker A should have died after its commit: {a.returncode}\n{log.read_text()[-3000:]}"
    )

    def stale() -> bool:
        p = store.processes.find(tid, ACTION, datetime.fromisoformat(instant))
        beat = p.heartbeat_at or p.started_at or p.created_at
        return datetime.now(UTC) - beat > timedelta(seconds=3.5)

    wait_for("A's row to go stale", stale, timeout=60)
    tries = 0
    while True:  # worker B on another host: again while A's lease holds, as the operator defers
        tries += 1
        b = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, env={**env(), **_home(tmp_path, "b")}
        )
        if b.returncode != 3 or tries > 30:
            break
        time.sleep(1.0)
    assert b.returncode == 0, b.stderr[-3000:]
    row = store.processes.find(tid, ACTION, datetime.fromisoformat(instant))
    after = read_state(meta_dir)
    return {"row": row, "before": before, "after": after, "tries": tries}


def _scenario(tmp_path: Path, url: str, store: Any, figures: Figures, prefix: str) -> None:
    warehouse = tmp_path / "wh"
    ids = [f"{CATALOG}.db.{prefix}{r}" for r in range(ROUNDS)]
    make_tables(warehouse, ids)
    notes = []
    for r, tid in enumerate(ids):
        _register(store, warehouse, tid)
        out = _round(tmp_path, url, store, warehouse, tid, r)
        row, before, after = out["row"], out["before"], out["after"]
        summary = row.summary or {}
        duplicated = 0 if summary.get("recorded_from_table") else 1
        figures.rounds += 1
        figures.rows_duplicated += duplicated
        figures.rows_lost += 0 if str(row.status) == "SUCCESS" else 1
        figures.non_terminal += 0 if row.status.is_terminal else 1
        notes.append(f"{tid}: {row.status} attempt {row.attempt} after {out['tries']} tries, recorded from the "
                     f"table {bool(summary.get('recorded_from_table'))} (attempt {summary.get('recorded_from_attempt')}), "
                     f"files {before.data_files}->{after.data_files}")  # fmt: skip
        print(notes[-1])
        assert (after.records, after.checksum) == (before.records, before.checksum), notes[-1]
        assert str(row.status) == "SUCCESS" and row.attempt == 2, notes[-1]
        assert duplicated == 0, f"the committed job was run again: {notes[-1]}"
        assert summary.get("recorded_from_attempt") == 1 and row.snapshot_id is not None, notes[-1]
    figures.notes = {"rounds": notes}


@pytest.mark.timeout(300 + 200 * ROUNDS)
def test_recovery_on_another_host_sqlite(tmp_path: Path, figures: Figures) -> None:
    from airflow_tablemgmt.store import Store

    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    _scenario(tmp_path, url, Store(url), figures, "s")


@pytest.mark.timeout(300 + 200 * ROUNDS)
def test_recovery_on_another_host_postgres(tmp_path: Path, pg: PgStores, figures: Figures) -> None:
    from urllib.parse import quote

    url = f"{pg.proxied_url}?options={quote(f'-csearch_path={pg.schema}')}"
    _scenario(tmp_path, url, pg.direct(), figures, "p")
