"""Faults on the catalogs over object storage (issue 25, item 7), against real servers started here:
Iceberg's REST catalog server and SeaweedFS's S3 gateway, with the test's proxies between them and
the Spark job (a real spark-submit through ``SparkJobHook``).

- the REST catalog answers the commit with 503 (down during the commit): the job fails with a reason
  naming the catalog, nothing is lost, and the next try commits;
- the S3 route is cut for a moment while the job writes (TCP proxy): the job either succeeds (the AWS
  client retries) or fails cleanly; either way the next try leaves the rows and checksum intact;
- a writer commits through the REST catalog during the compaction: no committed row lost;
- revoked S3 credentials: a clear failure that names the access denial, the secret nowhere in it.

On demand (``TABLEMGMT_CATALOG_MATRIX=1``, ``TABLEMGMT_FAULT_ROUNDS`` times each): the module starts a REST catalog
server and an S3 gateway and runs real spark-submits (≈ 3.5 min for the first two scenarios alone), which CI's 30
minutes cannot hold; CI keeps one compaction per catalog backend (tests/integration/catalogs).
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from tests.faults.conftest import ROUNDS, Figures
from tests.faults.proxy import TcpProxy
from tests.support.catalogs import content, s3_properties, seed, submit, writer
from tests.support.http_proxy import HttpFaultProxy
from tests.support.servers import ACCESS_KEY, SECRET_KEY, IcebergRestServer, SeaweedS3

pytestmark = [
    pytest.mark.faults,
    pytest.mark.catalog_matrix,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_CATALOG_MATRIX") != "1",
        reason="catalog faults run with TABLEMGMT_CATALOG_MATRIX=1",
    ),
]
MATRIX = os.environ.get("TABLEMGMT_CATALOG_MATRIX") == "1"
matrix_only = pytest.mark.skipif(
    not MATRIX, reason="the catalog fault matrix runs with TABLEMGMT_CATALOG_MATRIX=1"
)


@pytest.fixture(scope="module", autouse=True)
def _secrets_in_the_workers_environment() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("TMS_TEST_S3_KEY_ID", "TMS_TEST_S3_SECRET")}
    os.environ.update(TMS_TEST_S3_KEY_ID=ACCESS_KEY, TMS_TEST_S3_SECRET=SECRET_KEY)
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    with SeaweedS3(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory, s3: SeaweedS3) -> Iterator[IcebergRestServer]:
    with IcebergRestServer(tmp_path_factory.mktemp("rest"), s3) as server:
        yield server


@pytest.fixture(scope="module")
def rest_proxy(rest: IcebergRestServer) -> Iterator[HttpFaultProxy]:
    with HttpFaultProxy(("127.0.0.1", rest.port)) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def s3_proxy(s3: SeaweedS3) -> Iterator[TcpProxy]:
    with TcpProxy(("127.0.0.1", s3.port)) as proxy:
        yield proxy


def _catalog(name: str, uri: str, s3: SeaweedS3, endpoint: str | None = None, **extra: str) -> CatalogSpec:
    return CatalogSpec(
        name=name, type=CatalogType.REST, properties={"uri": uri, **s3_properties(s3, endpoint), **extra}
    )


def _commit_path(table: str) -> re.Pattern[str]:
    return re.compile(rf"^/v1/(?:[^/]+/)?namespaces/db/tables/{table}/?$")


def _register(store_url: str, catalog: CatalogSpec, table: str) -> None:
    """The catalog and the table in a store, through the CLI a user would use."""
    from airflow_tablemgmt.cli import main

    props = [f"--property={k}={v}" for k, v in catalog.properties.items()]
    assert main(["--store-url", store_url, "catalog", "set", catalog.name, "--type", "rest", *props]) == 0
    assert (
        main(
            [
                "--store-url",
                store_url,
                "register",
                table,
                "--action",
                "rewrite-files",
                "--set",
                "rewrite-files.min-input-files=2",
            ]
        )
        == 0
    )


def _run_now(store_url: str, table: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    """``tablemgmt run TABLE rewrite-files`` and the process row it recorded."""
    import json

    from airflow_tablemgmt.cli import main

    capsys.readouterr()
    code = main(["--store-url", store_url, "run", table, "rewrite-files"])
    capsys.readouterr()
    assert main(["--store-url", store_url, "processes", "--table", table, "--limit", "1", "-o", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    return code, row


@pytest.mark.timeout(1200)
def test_the_rest_catalog_down_during_the_commit(
    s3: SeaweedS3,
    rest: IcebergRestServer,
    rest_proxy: HttpFaultProxy,
    figures: Figures,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Through ``tablemgmt run`` (a store, a process row): the commit answered 503 fails the process with
    a reason naming the catalog; the next run commits; nothing lost, nothing half-committed."""
    catalog = _catalog("restflt", rest_proxy.uri, s3)
    direct = _catalog("restflt", rest.uri, s3)
    store_url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    rounds = ROUNDS if MATRIX else 1
    for i in range(rounds):
        name = f"down_{uuid.uuid4().hex[:6]}"
        table = seed(direct, name, appends=4)
        if i == 0:
            _register(store_url, catalog, str(table))
        else:
            _register_table(store_url, str(table))
        rows, checksum, files, snapshots = content(direct, table)
        commit = _commit_path(name)
        rest_proxy.rules = [
            lambda method, path, c=commit: 503 if method == "POST" and c.match(path) else None
        ]
        try:
            code, failed = _run_now(store_url, str(table), capsys)
        finally:
            rest_proxy.rules = []
        figures.rounds += 1
        assert any(commit.match(p) for _, p, _ in rest_proxy.injected), "the commit never reached the proxy"
        assert code != 0 and failed["status"] == "FAILED", failed
        reason = str(failed["failure_reason"])
        assert reason.startswith(f"catalog restflt (rest at {rest_proxy.uri}) failed: "), reason
        assert "503" in reason
        after = content(direct, table)
        figures.rows_lost += max(0, rows - after[0])
        assert after == (rows, checksum, files, snapshots)  # nothing half-committed

        code, retried = _run_now(store_url, str(table), capsys)
        assert code == 0 and retried["status"] == "SUCCESS", retried
        assert content(direct, table)[:3] == (rows, checksum, 1)
    figures.notes["injected_503"] = len(rest_proxy.injected)


def _register_table(store_url: str, table: str) -> None:
    from airflow_tablemgmt.cli import main

    assert (
        main(
            [
                "--store-url",
                store_url,
                "register",
                table,
                "--action",
                "rewrite-files",
                "--set",
                "rewrite-files.min-input-files=2",
            ]
        )
        == 0
    )


@pytest.mark.timeout(900)
def test_revoked_s3_credentials_fail_clearly_without_the_secret(
    s3: SeaweedS3, rest: IcebergRestServer, figures: Figures, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = _catalog("credflt", rest.uri, s3)
    table = seed(direct, f"cred_{uuid.uuid4().hex[:6]}", appends=3)
    before = content(direct, table)
    revoked = "revoked-secret-canary-4d1f"
    monkeypatch.setenv("TMS_TEST_S3_SECRET", revoked)
    result = submit(direct, table, "rewrite-files", {"min-input-files": 2})
    figures.rounds += 1
    assert not result.ok
    reason = result.error or ""
    assert re.search(r"403|Access ?Denied|SignatureDoesNotMatch|Forbidden", reason, re.I), reason
    assert revoked not in reason and SECRET_KEY not in reason
    monkeypatch.setenv("TMS_TEST_S3_SECRET", SECRET_KEY)
    assert content(direct, table) == before


@matrix_only
@pytest.mark.timeout(1800)
def test_the_s3_route_cut_while_the_job_writes(
    s3: SeaweedS3, rest: IcebergRestServer, s3_proxy: TcpProxy, figures: Figures
) -> None:
    direct = _catalog("s3flt", rest.uri, s3)
    # The job reaches S3 through the proxy; the REST server keeps its own direct route.
    catalog = _catalog("s3flt", rest.uri, s3, endpoint=f"http://127.0.0.1:{s3_proxy.port}")
    outcomes = {"ok": 0, "failed": 0}
    for _ in range(ROUNDS):
        table = seed(direct, f"cut_{uuid.uuid4().hex[:6]}", appends=6)
        rows, checksum, _, _ = content(direct, table)
        stop = threading.Event()

        def flap(stop: threading.Event = stop) -> None:
            time.sleep(8)  # the JVM has started and reads the table
            while not stop.is_set():
                s3_proxy.cut()
                time.sleep(1.5)
                s3_proxy.restore()
                time.sleep(3)

        flapper = threading.Thread(target=flap, daemon=True)
        flapper.start()
        try:
            result = submit(catalog, table, "rewrite-files", {"min-input-files": 2})
        finally:
            stop.set()
            flapper.join()
            s3_proxy.restore()
        outcomes["ok" if result.ok else "failed"] += 1
        figures.rounds += 1
        after = content(direct, table)
        figures.rows_lost += max(0, rows - after[0])
        figures.rows_duplicated += max(0, after[0] - rows)
        assert after[:2] == (rows, checksum)
        if not result.ok:
            retried = submit(catalog, table, "rewrite-files", {"min-input-files": 2})
            assert retried.ok, retried.error
            assert content(direct, table)[:3] == (rows, checksum, 1)
    figures.notes.update(outcomes)


@matrix_only
@pytest.mark.timeout(1800)
def test_a_writer_commits_through_the_rest_catalog_during_the_compaction(
    s3: SeaweedS3, rest: IcebergRestServer, figures: Figures
) -> None:
    import pyarrow as pa

    catalog = _catalog("wrflt", rest.uri, s3)
    for _ in range(ROUNDS):
        table = seed(catalog, f"wr_{uuid.uuid4().hex[:6]}", appends=6)
        base = set(range(60))
        committed: set[int] = set()
        stop = threading.Event()
        errors: list[str] = []

        def append(
            table: TableIdentifier = table,
            stop: threading.Event = stop,
            committed: set[int] = committed,
            errors: list[str] = errors,
        ) -> None:
            t = writer(catalog).load_table((table.namespace, table.name))
            start = 10_000
            while not stop.is_set():
                ids = list(range(start, start + 20))
                try:
                    t.append(pa.table({"id": ids, "v": ["w"] * 20}))
                    committed.update(ids)
                    start += 20
                except Exception as e:  # noqa: BLE001 - a conflict: reload and try the same batch again
                    errors.append(type(e).__name__)
                    t = writer(catalog).load_table((table.namespace, table.name))
                time.sleep(0.5)

        appender = threading.Thread(target=append, daemon=True)
        appender.start()
        try:
            result = submit(catalog, table, "rewrite-files", {"min-input-files": 2})
        finally:
            stop.set()
            appender.join(timeout=120)
        figures.rounds += 1
        ids = (
            writer(catalog)
            .load_table((table.namespace, table.name))
            .scan()
            .to_arrow()
            .column("id")
            .to_pylist()
        )
        present = set(ids)
        figures.rows_lost += len((base | committed) - present)
        figures.rows_duplicated += len(ids) - len(present)
        figures.notes.setdefault("batches", 0)
        figures.notes["batches"] += len(committed) // 20
        figures.notes.setdefault("rewrite_ok", 0)
        figures.notes["rewrite_ok"] += int(result.ok)
        assert present == base | committed and len(ids) == len(present), (len(ids), len(present), errors[:3])
