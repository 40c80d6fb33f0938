"""The no-JVM Delta log and Hudi timeline readers on S3 (SeaweedFS started by the test): a Delta log (JSON
commits and a Parquet checkpoint) and a Hudi 1.x timeline with base and log files are laid out on local disk,
copied byte for byte to ``s3a://<bucket>/lake/<ns>/<table>`` with pyarrow's S3 client, and read back through
the catalog's ``spark.hadoop.fs.s3a.*`` properties (secrets as ``env:`` references, resolved as the worker,
the triggerer and the REST API resolve them). No JVM: CI runs it (≈ 10 s, most of it SeaweedFS's start).

Proves: the readers' figures on S3 equal those on local disk; the factories skip a run that does not pay and
run one that does; the watchers see a commit land; the per-format health (the REST API's path) reads the
S3 table; a wrong secret and an unreachable endpoint give an error naming the table and location, never
the secret (a canary value)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.delta import metadata as delta
from airflow_tablemgmt.formats.delta.factory import DeltaProcessFactory
from airflow_tablemgmt.formats.hudi import metadata as hudi
from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.table_dir import StoreUnreachable
from airflow_tablemgmt.triggers.format_readers import reader_for, watched_catalog
from tests.support.servers import ACCESS_KEY, SECRET_KEY, SeaweedS3, free_ports

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 26, tzinfo=UTC)
ACCESS_ENV, SECRET_ENV = "TMS_PATH_S3_ACCESS", "TMS_PATH_S3_SECRET"
CANARY = "canary-wrong-secret-7f3a9c"


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ACCESS_ENV, ACCESS_KEY)
    monkeypatch.setenv(SECRET_ENV, SECRET_KEY)


def catalog(warehouse: str, endpoint: str, secret: str = f"env:{SECRET_ENV}") -> CatalogSpec:
    """The catalog as declared: the Spark job's S3A settings, secrets as references."""
    return CatalogSpec(
        name="lake",
        type="hadoop",
        warehouse=warehouse,
        properties={
            "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.access.key": f"env:{ACCESS_ENV}",
            "spark.hadoop.fs.s3a.secret.key": secret,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        },
    )


# ---- a Delta log and a Hudi timeline, as their writers lay them out --------------------------------------


def delta_commit(root: Path, version: int, operation: str, *actions: dict[str, Any]) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [{"commitInfo": {"operation": operation, "timestamp": version}}, *actions]
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))


def add(path: str, size: int, data_change: bool = True) -> dict[str, Any]:
    part = {"part": path.split("=")[1].split("/")[0]}
    return {"add": {"path": path, "size": size, "dataChange": data_change, "partitionValues": part}}


def remove(path: str) -> dict[str, Any]:
    return {"remove": {"path": path, "dataChange": False}}


META = {"metaData": {"configuration": {"delta.targetFileSize": "1048576"}, "partitionColumns": ["part"]}}


def delta_table(root: Path) -> None:
    """Two writes of small files, a Parquet checkpoint at version 1, then an OPTIMIZE (version 2)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = [add(f"part={i % 2}/w0-{i}.parquet", 1000 + i) for i in range(6)]
    second = [add(f"part={i % 2}/w1-{i}.parquet", 2000 + i) for i in range(3)]
    delta_commit(root, 0, "WRITE", META, *first)
    delta_commit(root, 1, "WRITE", *second)
    add_type = pa.struct(
        [
            ("path", pa.string()),
            ("size", pa.int64()),
            ("dataChange", pa.bool_()),
            ("partitionValues", pa.map_(pa.string(), pa.string())),
        ]
    )
    meta_type = pa.struct(
        [("configuration", pa.map_(pa.string(), pa.string())), ("partitionColumns", pa.list_(pa.string()))]
    )
    adds = [
        {**a["add"], "partitionValues": list(a["add"]["partitionValues"].items())} for a in first + second
    ]
    meta = {"configuration": [("delta.targetFileSize", "1048576")], "partitionColumns": ["part"]}
    pq.write_table(
        pa.table(
            {"add": pa.array([*adds, None], add_type), "metaData": pa.array([None] * 9 + [meta], meta_type)}
        ),
        root / "_delta_log" / f"{1:020d}.checkpoint.parquet",
    )
    (root / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 1, "size": 10}))
    merged = [add("part=0/opt-0.parquet", 9000, False), add("part=1/opt-1.parquet", 7000, False)]
    delta_commit(root, 2, "OPTIMIZE", *(remove(a["add"]["path"]) for a in first + second), *merged)


def instant(n: int) -> str:
    return f"202611260000{n:02d}000"


def hudi_table(root: Path) -> None:
    """A merge-on-read table (Hudi 1.x layout): three delta commits, a compaction, two delta commits."""
    hoodie = root / ".hoodie"
    timeline = hoodie / "timeline"
    timeline.mkdir(parents=True, exist_ok=True)
    (hoodie / "hoodie.properties").write_text("hoodie.table.name=events\nhoodie.table.type=MERGE_ON_READ\n")
    (hoodie / "metadata" / "files").mkdir(parents=True)
    (hoodie / "metadata" / "files" / "files-0000_0-1-0_00000000000000.hfile").write_bytes(b"x")
    for n in (1, 2, 3):
        hudi_commit(root, n, "deltacommit")
    (timeline / f"{instant(4)}.compaction.requested").write_bytes(b"")
    (timeline / f"{instant(4)}.compaction.inflight").write_bytes(b"")
    (timeline / f"{instant(4)}_{instant(5)}.commit").write_bytes(b"{}")
    for n in (6, 7):
        hudi_commit(root, n, "deltacommit")
    for part, group in (("p=1", "fg-a"), ("p=2", "fg-b")):
        (root / part).mkdir()
        (root / part / f"{group}_0-1-0_{instant(4)}.parquet").write_bytes(b"PAR1")
        for n in (6, 7):
            (root / part / f".{group}_{instant(4)}.log.{n - 5}_0-1-0").write_bytes(b"log")


def hudi_commit(root: Path, n: int, action: str) -> None:
    timeline = root / ".hoodie" / "timeline"
    timeline.mkdir(parents=True, exist_ok=True)
    (timeline / f"{instant(n)}.{action}.requested").write_bytes(b"")
    (timeline / f"{instant(n)}.{action}.inflight").write_bytes(b"")
    (timeline / f"{instant(n)}_{instant(n)[:-3]}999.{action}").write_bytes(b"{}")


def upload(s3: SeaweedS3, local: Path, prefix: str) -> None:
    fs = s3.filesystem()
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        with fs.open_output_stream(f"{s3.bucket}/{prefix}/{path.relative_to(local).as_posix()}") as out:
            out.write(path.read_bytes())


@pytest.fixture(scope="module")
def tables(s3: SeaweedS3, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same two tables on local disk and on S3."""
    local = tmp_path_factory.mktemp("lake")
    delta_table(local / "sales" / "orders")
    hudi_table(local / "app" / "events")
    upload(s3, local / "sales" / "orders", "lake/sales/orders")
    upload(s3, local / "app" / "events", "lake/app/events")
    return {"local": local, "s3": f"s3a://{s3.bucket}/lake"}


def resolved(s3: SeaweedS3, tables: dict[str, Any]) -> CatalogSpec:
    return resolve_catalog_spec(catalog(tables["s3"], s3.endpoint))


# ---- the readers: the same figures on S3 as on local disk ------------------------------------------------


def test_the_delta_log_on_s3_reads_as_on_local_disk(s3: SeaweedS3, tables: dict[str, Any]) -> None:
    props = resolved(s3, tables).properties
    local, remote = str(tables["local"] / "sales" / "orders"), f"{tables['s3']}/sales/orders"
    on_disk, on_s3 = delta.read_delta(local), delta.read_delta(remote, props)
    assert on_s3.files == on_disk.files == {"part=0/opt-0.parquet": 9000, "part=1/opt-1.parquet": 7000}
    assert (on_s3.version, on_s3.changes, on_s3.properties, on_s3.partition_columns) == (
        on_disk.version,
        on_disk.changes,
        on_disk.properties,
        on_disk.partition_columns,
    )
    assert on_s3.version == 2 and on_s3.changes.last_optimize_version == 2
    assert on_s3.properties == {"delta.targetFileSize": "1048576"}  # from the Parquet checkpoint
    assert delta.delta_health(remote, properties=props) == delta.delta_health(local)
    assert (
        delta.ancestry(remote, 10, props) == delta.ancestry(local, 10) == [(2, False), (1, True), (0, True)]
    )
    assert delta.latest_version(remote, props) == delta.latest_version(local) == 2


def test_the_hudi_timeline_on_s3_reads_as_on_local_disk(s3: SeaweedS3, tables: dict[str, Any]) -> None:
    props = resolved(s3, tables).properties
    local, remote = str(tables["local"] / "app" / "events"), f"{tables['s3']}/app/events"
    on_disk, on_s3 = hudi.read_timeline(local), hudi.read_timeline(remote, props)
    assert on_s3.summary() == on_disk.summary()
    assert (on_s3.completed, on_s3.pending) == (on_disk.completed, on_disk.pending)
    assert on_s3.completed_compactions() == [instant(4)] and on_s3.delta_commits_since_compaction() == 2
    assert hudi.timeline_listing(remote, props) == hudi.timeline_listing(local)
    health = hudi.hudi_health(remote, props)
    assert health == hudi.hudi_health(local)
    # the metadata table's files under .hoodie/ are not the table's
    assert (health["file_groups"], health["base_files"], health["log_files"]) == (2, 2, 4)


# ---- what runs on them: the factories' decisions, the watchers, the health hooks -------------------------


def test_the_factories_skip_what_does_not_pay_on_s3_and_run_what_does(
    s3: SeaweedS3, tables: dict[str, Any]
) -> None:
    declared = catalog(tables["s3"], s3.endpoint)
    context = TriggerContext(instant=NOW, catalog=declared, resolve_catalog=resolve_catalog_spec)
    local = tables["local"] / "fact"
    delta_table(local / "orders")
    hudi_table(local / "events")
    upload(s3, local, "lake/fact")
    orders = TableSpec(
        catalog="lake", namespace="fact", name="orders", format="delta", actions={"optimize": {}}
    )
    events = TableSpec(
        catalog="lake",
        namespace="fact",
        name="events",
        format="hudi",
        actions={"compaction": {"min-delta-commits": 4}},
    )
    # nothing added since the OPTIMIZE; 2 delta commits since the compaction (< 4): both skipped, no JVM
    assert DeltaProcessFactory().trigger(orders, "optimize", context) is None
    assert HudiProcessFactory().trigger(events, "compaction", context) is None
    more = tables["local"] / "fact-more"
    delta_commit(more / "orders", 3, "WRITE", *(add(f"part=0/w3-{i}.parquet", 500) for i in range(6)))
    for n in (8, 9):
        hudi_commit(more / "events", n, "deltacommit")
    upload(s3, more, "lake/fact")
    job = DeltaProcessFactory().trigger(orders, "optimize", context)
    assert job is not None and job.options["table-location"] == f"{tables['s3']}/fact/orders"
    assert HudiProcessFactory().trigger(events, "compaction", context) is not None
    # the job spec carries the references, never the resolved secret
    assert SECRET_KEY not in json.dumps(job.to_json_dict())


def test_the_watchers_poll_a_table_on_s3(s3: SeaweedS3, tables: dict[str, Any]) -> None:
    declared = catalog(tables["s3"], s3.endpoint)
    for fmt, ident in (("delta", "lake.sales.wtable"), ("hudi", "lake.app.wtable")):
        reader = reader_for(resolve_catalog_spec(watched_catalog(declared, fmt)))
        table = TableIdentifier.parse(ident)
        local = tables["local"] / "watch" / fmt
        if fmt == "hudi":
            hudi_table(local)
        else:
            delta_table(local)
        upload(s3, local, ident.replace(".", "/"))
        changed, first = reader.has_new_snapshot(table, None)
        assert changed and first is not None
        assert reader.has_new_snapshot(table, first) == (False, first)
        extra = tables["local"] / "watch" / f"{fmt}-next"
        if fmt == "delta":
            delta_commit(extra, 3, "WRITE", add("part=1/b.parquet", 5))
        else:
            hudi_commit(extra, 8, "deltacommit")
        upload(s3, extra, ident.replace(".", "/"))
        changed, second = reader.has_new_snapshot(table, first)
        assert changed and second != first, (fmt, first, second)
        assert reader.current_state(table).data_changed_since(first)


def test_the_health_hooks_read_a_table_on_s3(s3: SeaweedS3, tables: dict[str, Any]) -> None:
    from airflow_tablemgmt.services.health import read_file_stats

    declared = catalog(tables["s3"], s3.endpoint)
    events = TableSpec(
        catalog="lake",
        namespace="app",
        name="events",
        format="hudi",
        actions={"compaction": {"min-delta-commits": 2}},
    )
    reading = read_file_stats(declared, events)  # as the REST API and the page read it
    assert reading.format == "hudi" and reading.figures["log_files"] == 4
    assert [f.kind for f in reading.findings] == ["log_files"]
    local_catalog = CatalogSpec(name="lake", type="hadoop", warehouse=str(tables["local"]))
    assert reading.figures == read_file_stats(local_catalog, events).figures
    orders = TableSpec(
        catalog="lake", namespace="sales", name="orders", format="delta", actions={"optimize": {}}
    )
    assert read_file_stats(declared, orders).figures["target_file_size_bytes"] == 1048576


# ---- when the store cannot be read ------------------------------------------------------------------------


def test_a_wrong_secret_names_the_table_and_location_never_the_secret(
    s3: SeaweedS3, tables: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_tablemgmt.services.health import read_file_stats

    monkeypatch.setenv(SECRET_ENV, CANARY)
    declared = catalog(tables["s3"], s3.endpoint)
    props = resolve_catalog_spec(declared).properties
    remote = f"{tables['s3']}/sales/orders"
    errors: list[BaseException] = []
    for read in (
        lambda: delta.read_delta(remote, props),
        lambda: hudi.read_timeline(f"{tables['s3']}/app/events", props),
        lambda: DeltaProcessFactory().trigger(
            TableSpec(
                catalog="lake", namespace="sales", name="orders", format="delta", actions={"optimize": {}}
            ),
            "optimize",
            TriggerContext(instant=NOW, catalog=declared, resolve_catalog=resolve_catalog_spec),
        ),
        lambda: read_file_stats(
            declared, TableSpec(catalog="lake", namespace="app", name="events", format="hudi", actions={})
        ),
        lambda: reader_for(resolve_catalog_spec(watched_catalog(declared, "delta"))).current_state(
            TableIdentifier.parse("lake.sales.orders")
        ),
    ):
        with pytest.raises(StoreUnreachable) as caught:
            read()
        errors.append(caught.value)
    for e in errors:
        text = f"{e!s} {e!r}"
        assert CANARY not in text and SECRET_KEY not in text
        assert "s3a://warehouse/lake/" in text and s3.endpoint in text
        assert isinstance(e, OSError) and isinstance(e, HealthUnavailable)  # a watcher keeps polling
    assert "optimize on lake.sales.orders: " in str(errors[2])
    assert str(errors[3]).startswith("lake.app.events: ")
    assert str(errors[4]).startswith("delta table lake.sales.orders: ")


def test_an_unreachable_endpoint_fails_fast_and_clearly(tables: dict[str, Any]) -> None:
    (port,) = free_ports(1)
    props = resolve_catalog_spec(catalog(tables["s3"], f"http://127.0.0.1:{port}")).properties
    started = time.monotonic()
    with pytest.raises(
        StoreUnreachable,
        match=rf"s3a://warehouse/lake/sales/orders/_delta_log: the object "
        rf"store at http://127.0.0.1:{port} could not be read",
    ) as caught:
        delta.read_delta(f"{tables['s3']}/sales/orders", props)
    assert time.monotonic() - started < 30
    assert SECRET_KEY not in str(caught.value)


def test_an_unresolved_reference_is_never_sent(s3: SeaweedS3, tables: dict[str, Any]) -> None:
    declared = catalog(tables["s3"], s3.endpoint)  # as stored: references
    with pytest.raises(
        HealthUnavailable, match=r"spark.hadoop.fs.s3a.access.key: 'env:TMS_PATH_S3_ACCESS' is a "
    ):
        delta.read_delta(f"{tables['s3']}/sales/orders", declared.properties)
