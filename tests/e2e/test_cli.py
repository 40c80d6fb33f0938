"""The `tablemgmt` console command end to end: real subprocesses, a real SQLite store, real Spark.

Only one Spark job runs in this module (the `run` test); everything else is store-only.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN, IcebergTable, make_table, run
from tests.e2e.iceberg_reads import read_state

pytestmark = pytest.mark.e2e

STORE_URL = os.environ["TABLEMGMT_STORE_URL"]


def tablemgmt(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real console script. The store URL is passed explicitly (the `run` tests rely on the
    TABLEMGMT_STORE_URL fallback instead), which keeps Airflow out of the store-only commands."""
    return run([str(BIN / "tablemgmt"), "--store-url", STORE_URL, *args], timeout=timeout)


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, (
        f"exit {res.returncode}\nstdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-3000:]}"
    )
    return res


def store():  # type: ignore[no-untyped-def]
    from airflow_tablemgmt.store import Store

    return Store.for_url(STORE_URL)


def table_ids(*, include_removed: bool = False) -> set[str]:
    args = ["tables", "--json", *(["--all"] if include_removed else [])]
    return {t["table"] for t in json.loads(ok(tablemgmt(*args)).stdout)}


def register(table_id: str, warehouse: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return tablemgmt(
        "register",
        table_id,
        "--catalog-type",
        "hadoop",
        "--warehouse",
        str(warehouse),
        "--action",
        "rewrite-files",
        "--set",
        "rewrite-files.min-input-files=2",
        *extra,
    )


def test_register_list_show_remove_and_revive(tmp_path: Path) -> None:
    tid = "clireg.db.orders"
    assert "clireg.db.orders: created" in ok(register(tid, tmp_path / "wh")).stdout
    assert tid in table_ids()
    assert "clireg.db.orders: unchanged" in ok(register(tid, tmp_path / "wh")).stdout

    shown = json.loads(ok(tablemgmt("show", tid, "--json")).stdout)
    assert shown["table"] == tid and shown["managed_by"] == "store"
    assert shown["spec"]["catalog"] == "clireg" and shown["spec"]["name"] == "orders"
    assert shown["spec"]["actions"] == {"rewrite-files": {"min-input-files": 2}}
    options = shown["actions"]["rewrite-files"]["options"]
    assert options["min-input-files"] == 2 and options["strategy"] == "binpack"  # the set value + defaults
    assert shown["actions"]["rewrite-files"]["last_process"] is None

    assert f"{tid}: removed" in ok(tablemgmt("remove", tid)).stdout
    assert tid not in table_ids()
    assert tid in table_ids(include_removed=True)  # a soft delete: history keeps its table
    gone = tablemgmt("show", tid)
    assert gone.returncode == 2 and f"table {tid} is not registered: it was removed" in gone.stderr
    again = tablemgmt("remove", tid)
    assert again.returncode == 2 and "not registered" in again.stderr

    assert f"{tid}: created" in ok(register(tid, tmp_path / "wh")).stdout  # revived
    assert tid in table_ids()


TABLES_YAML = """
version: 1
catalogs:
  - {{name: clicode, type: hadoop, warehouse: {warehouse}}}
tables:
  - catalog: clicode
    namespace: db
    name: events
    owner: data-platform
    actions:
      rewrite-files: {{min-input-files: 2}}
      expire-snapshots: {{retain-last: {retain_last}}}
"""


def test_yaml_declared_table_is_owned_by_code(tmp_path: Path) -> None:
    tid = "clicode.db.events"
    path = tmp_path / "tables.yaml"
    path.write_text(TABLES_YAML.format(warehouse=tmp_path / "wh", retain_last=3))
    first = ok(tablemgmt("apply", str(path), "--no-prune"))
    assert "1 created" in first.stdout, first.stdout
    assert "0 created, 0 updated, 1 unchanged" in ok(tablemgmt("apply", str(path), "--no-prune")).stdout

    listed = {t["table"]: t for t in json.loads(ok(tablemgmt("tables", "--json")).stdout)}
    assert listed[tid]["managed_by"] == "code"
    assert set(listed[tid]["actions"]) == {"rewrite-files", "expire-snapshots"}

    for cmd in (register(tid, tmp_path / "wh"), tablemgmt("remove", tid)):
        assert cmd.returncode != 0
        assert "managed by dags/tables.yaml" in cmd.stderr, cmd.stderr
    # Neither refused command changed the row.
    shown = json.loads(ok(tablemgmt("show", tid, "--json")).stdout)
    assert shown["managed_by"] == "code" and shown["spec"]["owner"] == "data-platform"
    assert shown["actions"]["expire-snapshots"]["options"]["retain-last"] == 3


def test_bad_input_is_rejected_naming_file_table_field_value_and_rule(tmp_path: Path) -> None:
    known = "archive, clean, clustering, compaction, compute-stats, delete-orphans, expire-data, expire-snapshots, optimize, refresh, rewrite-deletes, rewrite-files, rewrite-manifests, vacuum"
    known_with_plugins = "archive, clean, clustering, compact, compaction, compute-stats, delete-orphans, expire-data, expire-partitions, expire-snapshots, optimize, refresh, remove-orphans, rewrite-deletes, rewrite-files, rewrite-manifests, vacuum"
    bad_yaml = tmp_path / "bad_tables.yaml"
    bad_yaml.write_text(
        TABLES_YAML.replace("clicode", "clibad").format(warehouse=tmp_path / "wh", retain_last=0)
    )
    res = tablemgmt("apply", str(bad_yaml))
    assert res.returncode == 2
    assert str(bad_yaml) in res.stderr
    assert "tables[0].actions.expire-snapshots.retain-last (table clibad.db.events)" in res.stderr
    assert "greater than or equal to 1" in res.stderr and "got 0" in res.stderr
    assert "nothing applied" in res.stderr

    cases = [
        (
            ["--set", "rewrite-files.strategy=fast"],
            ["actions.rewrite-files.strategy", "'binpack', 'sort' or 'zorder'", "got 'fast'"],
        ),
        (["--set", "compress.interval=1h"], ["unknown action 'compress'", f"known actions: {known}"]),
        # A run's action may be a format plugin's too (make install installs the Paimon plugin).
        (["--action", "purge"], ["unknown action 'purge'", f"known actions: {known_with_plugins}"]),
        (["--set", "rewrite-files"], ["must look like ACTION.OPTION=VALUE"]),
    ]
    for flags, expected in cases:
        res = register("clibad.db.events", tmp_path / "wh", *flags)
        assert res.returncode == 2, (flags, res.stdout, res.stderr)
        for text in expected:
            assert text in res.stderr, (flags, res.stderr)

    res = register("clibad.db.bad-name", tmp_path / "wh")
    assert res.returncode == 2
    assert "'bad-name' is not a valid identifier" in res.stderr
    assert "letters, digits and underscores, starting with a letter or underscore" in res.stderr

    # Nothing was applied by any of them.
    assert not {t for t in table_ids(include_removed=True) if t.startswith("clibad.")}
    assert all(t.spec.catalog != "clibad" for t in store().tables.list(include_deleted=True))
    assert "clibad" not in {c.name for c in store().catalogs.list()}  # not even the catalog


@pytest.fixture(scope="module")
def compact_me(tmp_path_factory: pytest.TempPathFactory) -> IcebergTable:
    table = make_table(tmp_path_factory.mktemp("cli-wh"), "clirun.db.events", files=30, rows=3000)
    ok(register(table.table_id, table.warehouse, "--action", "expire-snapshots"))
    return table


def tablemgmt_run(table_id: str, action: str, *args: str) -> subprocess.CompletedProcess[str]:
    # No --store-url: the CLI finds the store through the connection / TABLEMGMT_STORE_URL fallback.
    return run([str(BIN / "tablemgmt"), "run", table_id, action, "--json", *args], timeout=600)


def test_run_compacts_records_a_process_and_reuses_it_for_the_same_instant(
    compact_me: IcebergTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    tid = compact_me.table_id
    monkeypatch.setenv("TABLEMGMT_HEALTH_GATE", "1")  # the health gate (docs/health.md): 30 small files pay
    before = read_state(compact_me.metadata_dir)
    assert before.data_files >= 30
    instant = "2026-02-01T00:00:00+00:00"

    first = ok(tablemgmt_run(tid, "rewrite-files", "--instant", instant))
    out = json.loads(first.stdout)  # stdout is only the result; the logs went to stderr
    assert out["status"] == "SUCCESS" and out["attempt"] == 1 and out["reused"] is False
    assert "tablemgmt: submitting rewrite-files" in first.stderr

    after = read_state(compact_me.metadata_dir)
    assert after.data_files < before.data_files and after.data_files <= 4  # one per day partition
    assert (after.records, after.checksum) == (before.records, before.checksum)
    assert after.snapshot_id != before.snapshot_id
    summary = out["summary"]
    assert summary["before"]["data_files"] == before.data_files
    assert summary["after"]["data_files"] == after.data_files
    # Live records (what a query returns) are unchanged by a compaction.
    assert summary["before"]["live_records"] == summary["after"]["live_records"] == before.records

    listed = json.loads(ok(tablemgmt("processes", "--table", tid, "--json")).stdout)
    assert [(p["id"], p["status"], p["action"]) for p in listed] == [
        (out["process"], "SUCCESS", "rewrite-files")
    ]
    text = ok(tablemgmt("processes", "--table", tid)).stdout
    assert "SUCCESS" in text and tid in text and "2026-02-01T00:00:00" in text

    proc = json.loads(ok(tablemgmt("process", str(out["process"]), "--json")).stdout)
    assert proc["status"] == "SUCCESS" and proc["attempt"] == 1 and proc["summary"] == summary
    assert proc["snapshot_id"] == after.snapshot_id
    assert datetime.fromisoformat(proc["instant"]) == datetime(2026, 2, 1, tzinfo=UTC)
    shown = json.loads(ok(tablemgmt("show", tid, "--json")).stdout)
    assert shown["actions"]["rewrite-files"]["last_process"]["id"] == out["process"]

    # The same instant again: the recorded process is returned, no second Spark job.
    second = ok(tablemgmt_run(tid, "rewrite-files", "--instant", instant))
    again = json.loads(second.stdout)
    assert again["process"] == out["process"] and again["attempt"] == 1 and again["reused"] is True
    assert again["summary"] == summary
    assert "spark-submit" not in second.stderr.lower()
    assert read_state(compact_me.metadata_dir).snapshot_id == after.snapshot_id
    assert len(store().processes.list(table_id=tid)) == 1

    # An expiry that would drop no snapshot does not pay: a recorded, skipped process, no Spark job, and the
    # figures that decided it (tests/e2e/test_health_gate_run.py runs the whole gate on demand).
    expiry = ok(tablemgmt_run(tid, "expire-snapshots", "--instant", instant))
    skipped = json.loads(expiry.stdout)
    assert skipped["status"] == "SUCCESS" and "spark-submit" not in expiry.stderr.lower()
    gate = skipped["summary"]
    assert gate["skipped"] and gate["gate"] == "health" and gate["reason"].startswith("does not pay now")
    assert gate["health"]["figures"]["expirable_snapshots"] == 0 and gate["health"]["score"] == 100
    assert (
        "does not pay now"
        in ok(tablemgmt("processes", "--table", tid, "--action", "expire-snapshots")).stdout
    )


def test_cancel_and_clear_pending_processes(tmp_path: Path) -> None:
    from airflow_tablemgmt.core.process import ProcessStatus

    tid = "clicancel.db.events"
    ok(register(tid, tmp_path / "wh"))
    repo = store().processes
    p1, created = repo.open(tid, "rewrite-files", datetime(2026, 3, 1, tzinfo=UTC))
    assert created and p1.status == ProcessStatus.PENDING

    res = ok(tablemgmt("cancel", str(p1.id)))
    assert f"process {p1.id}: CANCELED" in res.stdout
    assert repo.get(p1.id).status == ProcessStatus.CANCELED
    assert repo.get(p1.id).failure_reason == "canceled from the CLI"
    assert f"process {p1.id}: CANCELED" in ok(tablemgmt("cancel", str(p1.id))).stdout  # idempotent
    done, _ = repo.open(tid, "rewrite-files", datetime(2026, 3, 1, 1, tzinfo=UTC))
    repo.transition(done.id, ProcessStatus.SUBMITTED, expected=ProcessStatus.PENDING, attempt=done.attempt)
    repo.transition(done.id, ProcessStatus.RUNNING, expected=ProcessStatus.SUBMITTED, attempt=done.attempt)
    repo.transition(done.id, ProcessStatus.SUCCESS, expected=ProcessStatus.RUNNING, attempt=done.attempt)
    finished = tablemgmt("cancel", str(done.id))  # a finished process cannot be canceled
    assert finished.returncode == 1 and f"process {done.id}: SUCCESS" in finished.stdout
    assert repo.get(done.id).status == ProcessStatus.SUCCESS
    missing = tablemgmt("cancel", "999999")
    assert missing.returncode == 2 and "no process with id 999999" in missing.stderr

    pending = [
        repo.open(tid, a, datetime(2026, 3, 2, h, tzinfo=UTC))[0]
        for a, h in [("rewrite-files", 0), ("rewrite-files", 1), ("expire-snapshots", 0)]
    ]
    res = ok(tablemgmt("clear", tid))
    assert f"{tid}: 3 process(es) canceled" in res.stdout
    assert {repo.get(p.id).status for p in pending} == {ProcessStatus.CANCELED}
    assert repo.active(tid) == []
    listed = ok(tablemgmt("processes", "--table", tid, "--status", "canceled", "--json")).stdout
    assert len(json.loads(listed)) == 4  # p1 and the three cleared; the finished one untouched
