"""Issue 39's proof as one scenario, real parts only: a catalog kept healthy by one catalog-wide policy.

A JDBC catalog (Iceberg's, on the suite's PostgreSQL) with its warehouse on S3 (SeaweedFS's gateway, started
here) holds N tables written by pyiceberg in two namespaces, half healthy (one data file) and half not (8 small
files: more than the default ``min-small-files`` 5). One policy matching the whole catalog (rewrite-files and
expire-snapshots) is declared in a tables.yaml beside the catalog and one table's own declaration, applied with
``tablemgmt apply``; ``tablemgmt discover`` enrols every table but the one opted out by its
``tablemgmt.maintenance=disabled`` property. Then each table's rewrite-files runs as a user runs it, ``tablemgmt
run`` with the health gate on (the product's default), its Spark jobs on a real Spark Connect server with its UI
on (where each job's cost is read): the compaction runs only where it pays, on the healthy tables it is a
recorded skip whose reason carries the figures (and so is the declared table's expiry, nothing being old). A
table created afterwards is enrolled by the next discovery pass and maintained; the opted-out table is never
touched; ``tablemgmt explain`` shows the precedence for the declared table; the real runs' cost columns are non-
zero and ``tablemgmt cost --by policy`` rolls them up.

On demand (``TABLEMGMT_FULL=1``): N = 4 (2 healthy, 2 not) and N = 50. Both print a per-table table."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from tests.e2e.conftest import BIN
from tests.integration.catalogs.conftest import postgres_database
from tests.support.catalogs import s3_properties, seed, writer
from tests.support.servers import ACCESS_KEY, SECRET_KEY, SeaweedS3, stop_group

pytestmark = pytest.mark.e2e

NAMESPACES = ("sales", "ops")
SMALL_FILES = 8  # an unhealthy table's data files: > min-small-files (5) by default, so a compaction pays
CONNECT_CONN = "spark_connect_default"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    server = SeaweedS3(tmp_path_factory.mktemp("seaweed")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A Spark Connect server with what the catalog needs (Iceberg, its AWS bundle, PostgreSQL's driver) and its
    UI on (its status API is where a Connect job's cost is read). Started here, waited for when a job runs."""
    from airflow_tablemgmt.spark.connect.server import free_port, server_spec, start_server

    port = free_port()
    spec = server_spec(
        port=port, needs=("iceberg", "aws", "postgresql"), master="local[2]", ui_port=free_port()
    )
    log = tmp_path_factory.mktemp("connect") / "server.log"
    proc = start_server(spec, log)
    yield {"port": port, "proc": proc, "log": log}
    stop_group(proc)


def _wait_for(server: dict[str, Any]) -> None:
    from airflow_tablemgmt.spark.connect.server import wait_for_port

    try:
        wait_for_port("127.0.0.1", server["port"], 300, server["proc"])
    except (TimeoutError, RuntimeError) as e:
        raise AssertionError(f"{e}\n{server['log'].read_text(errors='replace')[-3000:]}") from None


def _catalog(s3: SeaweedS3, database: str) -> CatalogSpec:
    return CatalogSpec(
        name="lake",
        type=CatalogType.JDBC,
        warehouse=f"s3://{s3.bucket}/lake",
        properties={
            "uri": f"jdbc:postgresql://127.0.0.1:5432/{database}",
            "jdbc.user": "postgres",
            "jdbc.password": "env:TMS_TEST_PG_PASSWORD",
            **s3_properties(s3),
        },
    )


def _tables_yaml(path: Path, catalog: CatalogSpec) -> Path:
    """The catalog, one table with its own declaration, and the catalog-wide policy, as a user writes them."""
    doc = {
        "catalogs": [catalog.model_dump(mode="json", exclude_none=True)],
        "tables": [
            {
                "catalog": "lake",
                "namespace": "sales",
                "name": "declared",
                "actions": {"expire-snapshots": {"older-than": "7d"}},
            }
        ],
        "policies": [
            {
                "name": "fleet",
                "match": {"catalog": "lake", "format": "iceberg"},
                "actions": {"rewrite-files": {}, "expire-snapshots": {"retain-last": 5}},
            }
        ],
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def _env(connect_port: int) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for key in [k for k in env if k.startswith(("AIRFLOW__SECRETS__", "AIRFLOW__WORKERS__SECRETS_BACKEND"))]:
        del env[key]
    env.update(
        TABLEMGMT_HEALTH_GATE="1",  # the product's default (the suite turns it off in tests/conftest.py)
        TMS_TEST_S3_KEY_ID=ACCESS_KEY,
        TMS_TEST_S3_SECRET=SECRET_KEY,
        TMS_TEST_PG_PASSWORD="unused",
        AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID=CONNECT_CONN,
        AIRFLOW_CONN_SPARK_CONNECT_DEFAULT=json.dumps(
            {
                "conn_type": "spark_connect",
                "host": "sc://127.0.0.1",
                "port": connect_port,
                "extra": {"slots": 4},
            }
        ),
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
    )
    return env


class Cli:
    def __init__(self, store_url: str, env: dict[str, str]) -> None:
        self.store_url, self.env = store_url, env

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(BIN / "tablemgmt"), "--store-url", self.store_url, *args]
        res = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=900)
        if ok:
            assert res.returncode == 0, (
                f"{' '.join(args)}: exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            )
        return res

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


def _health(store: Any, table_id: str) -> tuple[int, list[str]]:
    """The product's own health read (``tablemgmt show``'s and REST's), fresh."""
    from airflow_tablemgmt.services.health import table_health

    h = table_health(store, table_id, ttl=0)
    assert h.score is not None, h.error
    return h.score.score, [f.action for f in h.score.findings]


def _snapshot(catalog: CatalogSpec, ident: tuple[str, ...]) -> int | None:
    snap = writer(catalog).load_table(ident).current_snapshot()
    return snap.snapshot_id if snap else None


@pytest.mark.timeout(3600)
@pytest.mark.parametrize(
    "n",
    [
        pytest.param(
            4,
            id="4-tables",
            marks=pytest.mark.on_demand(
                reason="the whole scenario (≈ 3 min at load 17); CI covers its parts: enrolment "
                "(e2e/test_cli_discover.py, e2e/test_discovery_dag.py), policies on a declared table "
                "(e2e/test_policy_declared_dag.py, e2e/test_cli_policies.py), the health gate "
                "(e2e/test_cli.py::test_run_compacts_records_a_process_and_reuses_it_for_the_same_instant, "
                "unit/formats/test_health_gate.py), the cost on Connect (integration/connect/test_connect_engine.py)"
            ),
        ),
        pytest.param(
            50,
            id="50-tables",
            marks=pytest.mark.on_demand(
                reason="50 tables, 51 runs, 26 compactions on Spark Connect (≈ 20 min at load 20); the same "
                "scenario on 4 tables is test_one_policy_keeps_a_catalog_healthy[4-tables]"
            ),
        ),
    ],
)
def test_one_policy_keeps_a_catalog_healthy(
    n: int, s3: SeaweedS3, connect: dict[str, Any], tmp_path: Path
) -> None:
    from airflow_tablemgmt.store import Store

    started = time.monotonic()
    env = _env(connect["port"])
    os.environ.update(
        {k: env[k] for k in ("TMS_TEST_S3_KEY_ID", "TMS_TEST_S3_SECRET", "TMS_TEST_PG_PASSWORD")}
    )
    with postgres_database("tms_fleet") as database:
        catalog = _catalog(s3, database)
        _scenario(n, catalog, Cli(f"sqlite:///{tmp_path / 'tablemgmt.db'}", env), connect, tmp_path, Store)
    print(f"[{n} tables] {time.monotonic() - started:.0f} s")


def _scenario(
    n: int, catalog: CatalogSpec, cli: Cli, connect: dict[str, Any], tmp_path: Path, store_class: Any
) -> None:
    t0 = time.monotonic()

    def phase(what: str) -> None:
        print(f"[{n} tables] {time.monotonic() - t0:6.1f} s: {what}", flush=True)

    healthy = {f"lake.{NAMESPACES[(i // 2) % 2]}.t{i:02d}" for i in range(0, n, 2)}
    unhealthy = {f"lake.{NAMESPACES[(i // 2) % 2]}.t{i:02d}" for i in range(1, n, 2)}
    declared, private, late = "lake.sales.declared", "lake.ops.private", "lake.ops.late"

    def make(table_id: str, appends: int, properties: dict[str, str] | None = None) -> None:
        _, namespace, name = table_id.split(".")
        seed(catalog, name, appends, namespace=namespace, properties=properties)

    for ns in NAMESPACES:
        writer(catalog).create_namespace((ns,))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda t: make(t, 1), [*sorted(healthy), declared]))
        list(pool.map(lambda t: make(t, SMALL_FILES), sorted(unhealthy)))
    make(private, SMALL_FILES, {"tablemgmt.maintenance": "disabled"})  # unhealthy, but opted out
    private_snapshot = _snapshot(catalog, ("ops", "private"))
    phase(f"{n + 2} tables written by pyiceberg")

    cli("apply", str(_tables_yaml(tmp_path / "tables.yaml", catalog)))
    first = cli.json("discover")
    assert sorted(c["table"] for c in first["changes"] if c["change"] == "enrolled") == sorted(
        healthy | unhealthy
    ), first
    store = store_class(cli.store_url)
    rows = {r.spec.id: r for r in store.tables.list()}
    assert set(rows) == healthy | unhealthy | {declared}  # the opted-out table is not enrolled
    assert {rows[t].policy for t in healthy | unhealthy} == {"fleet"} and rows[declared].policy is None

    before = {t: _health(store, t) for t in sorted(rows)}
    for t in healthy | {declared}:
        assert before[t] == (100, []), (t, before[t])
    for t in unhealthy:
        assert before[t][0] < 100 and "rewrite-files" in before[t][1], (t, before[t])

    phase("applied, discovered, health read")
    _wait_for(connect)
    phase("Spark Connect server listening")
    results = _run_all(cli, sorted(rows))
    phase(f"{len(rows)} runs")

    # a table created afterwards: enrolled by the next pass, then maintained
    make(late, SMALL_FILES)
    second = cli.json("discover")
    assert [(c["table"], c["change"]) for c in second["changes"]] == [(late, "enrolled")], second
    before[late] = _health(store, late)
    assert before[late][0] < 100 and "rewrite-files" in before[late][1]
    results.update(_run_all(cli, [late]))
    unhealthy = unhealthy | {late}
    phase("the late table enrolled and maintained")

    after = {t: _health(store, t) for t in sorted(results)}
    runs: list[dict[str, Any]] = []
    for t in sorted(results):
        compaction = results[t]
        assert compaction["status"] == "SUCCESS", compaction
        summary = compaction["summary"]
        if t in unhealthy:
            assert not summary.get("skipped"), (t, summary)
            assert (summary["before"]["data_files"], summary["after"]["data_files"]) == (SMALL_FILES, 1)
            assert after[t] == (100, []), (t, after[t])
            runs.append(compaction)
        else:
            assert summary["skipped"] and summary["gate"] == "health", (t, summary)
            assert summary["reason"].startswith("does not pay now"), summary
            figures = summary["health"]["figures"]
            assert (figures["data_files"], figures["removable_data_files"]) == (1, 0), figures
            assert figures["thresholds"]["min-small-files"] == 5
            assert after[t] == before[t]

    # the opted-out table: never enrolled, no process, no enrolment record, not a commit on it
    assert store.processes.list(table_id=private, limit=10) == []
    assert private not in {r["table_id"] for r in cli.json("enrolments")}
    assert _snapshot(catalog, ("ops", "private")) == private_snapshot
    assert any(s["table"] == private and "opted out" in s["reason"] for s in second["skipped"]), second

    # precedence for the declared table: its own key, then the policy's, then the defaults
    doc = cli.json("explain", declared)
    es = doc["actions"]["expire-snapshots"]
    assert es["older-than"] == {"value": "7d", "source": "table"}
    assert es["retain-last"] == {"value": 5, "source": "policy:fleet"}
    assert es["retry-delay"]["source"] == "default"
    assert doc["actions"]["rewrite-files"]["enabled"] == {"value": True, "source": "policy:fleet"}
    # and its run takes them: its own older-than (7d) and the policy's retain-last decide the expiry's skip
    expiry = cli.json("run", declared, "expire-snapshots")
    assert expiry["status"] == "SUCCESS" and expiry["summary"]["skipped"], expiry
    assert expiry["summary"]["health"]["figures"]["expirable_snapshots"] == 0
    print(f"expire-snapshots on {declared}: {expiry['summary']['reason']}")

    # the real runs' cost, each read back from its process; rolled up by policy
    costs = {}
    for run in runs:
        process = cli.json("process", str(run["process"]))
        cost = {k: process[k] for k in ("core_seconds", "cpu_seconds", "bytes_read", "bytes_written")}
        assert cost["core_seconds"] > 0 and cost["bytes_read"] > 0 and cost["bytes_written"] > 0, cost
        costs[run["process"]] = cost
    rollup = {r["policy"]: r for r in cli.json("cost", "--by", "policy")}
    fleet = rollup["fleet"]
    assert fleet["core_seconds"] == pytest.approx(sum(c["core_seconds"] for c in costs.values()), rel=1e-6)
    assert fleet["bytes_written"] == sum(c["bytes_written"] for c in costs.values())

    _print_table(results, before, after, unhealthy, costs)
    print(f"[{n} tables] tablemgmt cost --by policy:\n{cli('cost', '--by', 'policy').stdout}")
    store.dispose()


def _run_all(cli: Cli, tables: list[str]) -> dict[str, dict[str, Any]]:
    """``tablemgmt run <table> rewrite-files`` for each table, three at a time (each CLI process reads the
    table's health before any Spark job: CPU the 2-core machine has little of)."""

    def one(table: str) -> tuple[str, dict[str, Any]]:
        return table, cli.json("run", table, "rewrite-files")

    with ThreadPoolExecutor(3) as pool:
        return dict(pool.map(one, tables))


def _print_table(
    results: dict[str, Any],
    before: dict[str, tuple[int, list[str]]],
    after: dict[str, tuple[int, list[str]]],
    unhealthy: set[str],
    costs: dict[int, dict[str, Any]],
) -> None:
    lines = [f"{'table':<22} {'healthy':<8} {'health':<11} {'rewrite-files':<14} reason / cost"]
    for t in sorted(results):
        run = results[t]
        summary = run["summary"]
        status = "SKIPPED" if summary.get("skipped") else run["status"]
        if run["process"] in costs:
            c = costs[run["process"]]
            note = (
                f"{summary['before']['data_files']}->{summary['after']['data_files']} files, "
                f"{c['core_seconds']:.2f} core-s, read {c['bytes_read']} B, wrote {c['bytes_written']} B"
            )
        else:
            note = summary.get("reason", "")[:150]
        lines.append(
            f"{t:<22} {'no' if t in unhealthy else 'yes':<8} "
            f"{f'{before[t][0]} -> {after[t][0]}':<11} {status:<14} {note}"
        )
    print("\n" + "\n".join(lines))
