"""A format's own health through its hook (``Format.health`` of its descriptor): Hudi's and Delta's tables are
measured from their timeline / log and files (laid out on disk as Hudi 1.x and Delta write them; no JVM),
scored, stored, sorted and filtered like any other table, and shown with the format's findings in the REST
API's list and health answers; the generic modules never name a format."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.metadata.health import FormatHealth
from airflow_tablemgmt.services import health, overview
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.listing import TableFilter
from tests.unit.test_observability import StatsdReceiver, statsd  # noqa: F401 - the real StatsD receiver

ROOT = Path(__file__).resolve().parents[3]
FG = "9bbb28fa-bee5-430e-b5bd-1522fecc4d76-0"


def _hudi_mor(table: Path, delta_commits: int, logs: int, *, pending: bool = False) -> None:
    """A merge-on-read table: ``delta_commits`` completed delta commits, a file group with ``logs`` log files."""
    timeline = table / ".hoodie" / "timeline"
    timeline.mkdir(parents=True)
    (table / ".hoodie" / "hoodie.properties").write_text(
        "hoodie.table.name=t\nhoodie.table.type=MERGE_ON_READ\n"
    )
    for i in range(delta_commits):
        instant = 20261125100000000 + i * 100000
        (timeline / f"{instant}.deltacommit.requested").write_text("")
        (timeline / f"{instant}_{instant + 1000}.deltacommit").write_text("")
    if pending:
        (timeline / "20261125200000000.compaction.requested").write_text("")
    part = table / "day=2026-11-25"
    part.mkdir()
    (part / f"{FG}_0-60-84_20261125100000000.parquet").write_bytes(b"x" * 100)
    for v in range(1, logs + 1):
        (part / f".{FG}_20261125100000000.log.{v}_0-111-17{v}").write_bytes(b"x" * 10)


def _delta(table: Path, files: int, *, optimized_last: bool = False) -> None:
    """A Delta log of ``files`` WRITE commits of one 10 MiB file each (then an OPTIMIZE, if asked)."""
    log = table / "_delta_log"
    log.mkdir(parents=True)
    for v in range(files):
        lines = [
            {"commitInfo": {"operation": "WRITE"}},
            {"add": {"path": f"f{v}.parquet", "size": 10 << 20, "dataChange": True}},
        ]
        (log / f"{v:020d}.json").write_text("\n".join(map(json.dumps, lines)))
    if optimized_last:
        removes = [{"remove": {"path": f"f{v}.parquet", "dataChange": False}} for v in range(files)]
        add = {"add": {"path": "big.parquet", "size": files * (10 << 20), "dataChange": False}}
        lines = [{"commitInfo": {"operation": "OPTIMIZE"}}, *removes, add]
        (log / f"{files:020d}.json").write_text("\n".join(map(json.dumps, lines)))


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setattr(health, "_CACHE", health._Cache(lambda: 0.0))
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", type="hadoop", warehouse=str(tmp_path / "wh")), Owner.STORE)
    tables = {
        "events": ("hudi", {"compaction": {"min-delta-commits": 3}, "clean": {"retain-commits": 2}}),
        "quiet": ("hudi", {"compaction": {}}),
        "orders": ("delta", {"optimize": {}, "vacuum": {}}),
        "compacted": ("delta", {"optimize": {}}),
    }
    for name, (fmt, actions) in tables.items():
        s.tables.upsert(
            TableSpec(catalog="lake", namespace="db", name=name, format=fmt, actions=actions), Owner.STORE
        )
    wh = tmp_path / "wh" / "db"
    _hudi_mor(wh / "events", delta_commits=6, logs=6, pending=True)
    _hudi_mor(wh / "quiet", delta_commits=1, logs=1)
    _delta(wh / "orders", 40)
    _delta(wh / "compacted", 6, optimized_last=True)
    yield s
    s.dispose()


def test_hudi_findings_from_its_timeline_and_files(store: Store) -> None:
    h = health.table_health(store, "lake.db.events")
    assert h.error is None and h.files is None and isinstance(h.format_health, FormatHealth)
    fig = h.format_health.figures
    assert (fig["table_type"], fig["delta_commits_since_compaction"], fig["log_files"]) == (
        "MERGE_ON_READ",
        6,
        6,
    )
    assert fig["min_delta_commits"] == 3 and fig["retain_commits"] == 2  # the table's own settings
    kinds = {f.kind: f for f in h.format_health.findings}
    assert set(kinds) == {"pending_compaction", "log_files", "uncleaned_commits"}
    assert kinds["log_files"].action == "compaction" and kinds["log_files"].points == 30  # 6 logs / (2 x 3)
    assert (
        kinds["uncleaned_commits"].action == "clean"
        and "6 commits since the last clean" in kinds["uncleaned_commits"].reason
    )
    assert h.score is not None and h.score.score == 100 - 20 - 30 - kinds["uncleaned_commits"].points
    out = h.to_dict()
    assert out["format_health"]["format"] == "hudi" and out["health"]["needs_attention"]
    # one delta commit, one log file, no clean due (default retain-commits 10): nothing would help
    quiet = health.table_health(store, "lake.db.quiet")
    assert quiet.format_health is not None and quiet.format_health.findings == () and quiet.score.score == 100


def test_delta_small_files_against_the_optimize_target(store: Store) -> None:
    h = health.table_health(store, "lake.db.orders")
    assert h.format_health is not None
    fig = h.format_health.figures
    assert (fig["data_files"], fig["small_files"], fig["compacted_data_files"]) == (40, 40, 1)
    (finding,) = h.format_health.findings
    # 60 x removable / files x min(1, removable / 50), as the built-in small-files finding
    assert (finding.kind, finding.action, finding.points) == (
        "small_files",
        "optimize",
        round(60 * 39 / 40 * 39 / 50),
    )
    assert "OPTIMIZE would remove 39" in finding.reason
    # one file after OPTIMIZE and nothing added since: OPTIMIZE would not help
    done = health.table_health(store, "lake.db.compacted")
    assert done.format_health is not None and done.format_health.findings == ()
    assert done.format_health.figures["data_files"] == 1


def test_the_list_and_the_overview_take_the_formats_findings(store: Store) -> None:
    for t in ("lake.db.events", "lake.db.quiet", "lake.db.orders", "lake.db.compacted"):
        health.table_health(store, t)
    page = overview.list_page(store, TableFilter(), sort="health", warm_missing=False)
    assert [r.table for r in page.items] == [
        "lake.db.events",
        "lake.db.orders",
        "lake.db.compacted",
        "lake.db.quiet",
    ]
    top = page.items[0].health
    assert top is not None and top.files is None and top.format_health is not None
    assert top.format_health.format == "hudi" and top.score.needs_attention
    red = overview.list_page(store, TableFilter(), needs_attention=True, warm_missing=False)
    assert [r.table for r in red.items] == ["lake.db.events", "lake.db.orders"]
    o = overview.overview(store, ttl=0, warm_missing=False)
    assert o["needs_attention"] == 2 and o["measured_tables"] == 4
    assert o["attention_by_kind"]["log_files"] == {
        "tables": 1,
        "action": "compaction",
        "examples": ["lake.db.events"],
    }
    assert o["attention_by_kind"]["small_files"]["action"] == "optimize"

    from airflow_tablemgmt.api.views import summary_out

    row = summary_out(page.items[0]).model_dump()
    assert row["health"]["format"] == "hudi" and row["health"]["format_figures"]["log_files"] == 6
    assert {f["action"] for f in row["health"]["findings"]} == {"compaction", "clean"}


def test_the_score_reaches_the_metrics(store: Store, statsd: StatsdReceiver) -> None:  # noqa: F811
    h = health.table_health(store, "lake.db.orders")
    assert h.score is not None
    statsd.expect({"airflow.tablemgmt.table.health_score.lake__db__orders": [f"{h.score.score}|g"]})


def test_the_built_in_formats_declare_their_hooks_in_their_descriptors() -> None:
    from airflow_tablemgmt.factories.health import format_hook
    from airflow_tablemgmt.formats import api

    assert format_hook("hudi") is not None and format_hook("delta") is not None
    assert {"Format", "FormatHealth", "Finding", "HealthUnavailable"} <= set(api.__all__)


def test_the_workers_unhealthy_alert_reads_the_formats_health_as_the_page_does(store: Store) -> None:
    """``notifications/health.py`` scores a Hudi or Delta table with its format's findings (the worker's
    ``unhealthy`` alert), the same score the page and the REST API give."""
    from airflow_tablemgmt.notifications.health import read_health

    for table_id in ("lake.db.events", "lake.db.orders", "lake.db.quiet"):
        spec = store.tables.get(table_id)
        page = health.table_health(store, table_id).score
        assert page is not None and read_health(store, spec).score == page.score, table_id
    assert read_health(store, store.tables.get("lake.db.events")).needs_attention


GENERIC = (
    "airflow_tablemgmt/services/health.py",
    "airflow_tablemgmt/factories/health.py",
    "airflow_tablemgmt/notifications/health.py",
    "airflow_tablemgmt/services/overview.py",
    "airflow_tablemgmt/store/listing.py",
    "airflow_tablemgmt/store/table_health.py",
    "airflow_tablemgmt/metadata/health.py",
    "airflow_tablemgmt/api/views.py",
    "airflow_tablemgmt/api/schemas.py",
    "airflow_tablemgmt/api/dynamic_schemas.py",
    "airflow_tablemgmt/ui/app.js",
)


@pytest.mark.parametrize("path", GENERIC)
def test_the_generic_modules_never_name_a_format(path: str) -> None:
    text = (ROOT / path).read_text()
    assert not re.findall(r"\b(?:hudi|delta|paimon)\b", text, flags=re.IGNORECASE)


def test_a_plugin_declares_its_hook_through_the_public_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Paimon plugin (plugins/paimon, installed in development): its snapshot files on disk."""
    pytest.importorskip("tablemgmt_paimon")
    monkeypatch.setattr(health, "_CACHE", health._Cache(lambda: 0.0))
    table = tmp_path / "wh" / "db.db" / "events"
    (table / "snapshot").mkdir(parents=True)
    for i in range(1, 9):  # eight APPEND commits, no compaction
        doc = {"id": i, "commitKind": "APPEND", "timeMillis": 1764000000000 + i, "totalRecordCount": 10 * i}
        (table / "snapshot" / f"snapshot-{i}").write_text(json.dumps(doc))
    (table / "bucket-0").mkdir()
    for i in range(8):
        (table / "bucket-0" / f"data-{i}.parquet").write_bytes(b"x" * 1000)
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    try:
        s.catalogs.upsert(
            CatalogSpec(name="lake", type="hadoop", warehouse=str(tmp_path / "wh")), Owner.STORE
        )
        spec = TableSpec(
            catalog="lake",
            namespace="db",
            name="events",
            format="paimon",
            actions={"compact": {}, "expire-snapshots": {"retain-max": 5, "retain-min": 1}},
        )
        s.tables.upsert(spec, Owner.STORE)
        h = health.table_health(s, "lake.db.events")
        assert h.format_health is not None and h.format_health.format == "paimon"
        assert h.format_health.figures["data_files"] == 8 and h.format_health.figures["snapshots"] == 8
        kinds = {f.kind: (f.action, f.points) for f in h.format_health.findings}
        assert kinds == {"uncompacted_commits": ("compact", 12), "snapshots": ("expire-snapshots", 10)}
        assert h.score is not None and h.score.score == 78
    finally:
        s.dispose()
