"""A fifth table format written as a plugin needs no change outside its own package: ``toyparquet``
(tests/support/toy_format, a directory of Parquet files) is installed as a distribution of its own, found
through the ``airflow_tablemgmt.formats`` entry point like the built-in formats, and then registered,
validated, planned, measured, shown, scheduled and dispatched on the driver by the generic code. Run in a
fresh interpreter, so the registry starts empty and meets the format only through its entry point."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOY = ROOT / "tests" / "support" / "toy_format"


def toy_distribution(site: Path) -> Path:
    """A site directory holding the toy format's installed metadata (what pip writes), its entry point
    included; the package itself is on the path beside it."""
    info = site / "airflow_tablemgmt_toyparquet-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: airflow-tablemgmt-toyparquet\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text("[airflow_tablemgmt.formats]\ntoyparquet = toyparquet:FORMAT\n")
    return site


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from datetime import UTC, datetime
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_tablemgmt.core.factory import TriggerContext
    from airflow_tablemgmt.core.formats import FORMATS
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.dag_factory.build import build_dags
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.factories.health import read_health, score_of
    from airflow_tablemgmt.factories.views import format_view
    from airflow_tablemgmt.spark.conf import session_conf, validated_catalog
    from airflow_tablemgmt.spark.job.plugins import format_maintainer, reads_own_table
    from airflow_tablemgmt.spark.launch.artifacts import catalog_needs

    warehouse = Path(sys.argv[1])
    table_dir = warehouse / "ns" / "events"
    table_dir.mkdir(parents=True)
    for i in range(3):
        pq.write_table(pa.table({"id": [i, i + 10]}), table_dir / f"part-{i}.parquet")
    out = {}
    out["builtin"] = [f.name for f in FORMATS.builtin()]
    out["known"] = FORMATS.known()
    spec = TableSpec(catalog="lake", namespace="ns", name="events", format="toyparquet",
                     actions={"compact": {"min-files": 2}})
    try:
        TableSpec(catalog="lake", namespace="ns", name="events", format="toyparquet", actions={"vacuum": {}})
    except ValueError as e:
        out["refused"] = str(e)
    catalog = CatalogSpec(name="lake", type="hadoop", warehouse=str(warehouse))
    factory = default_factories().for_action("toyparquet", "compact")
    out["factory"] = type(factory).__name__
    job = factory.trigger(spec, "compact", TriggerContext(datetime.now(UTC), catalog))
    out["job"] = None if job is None else {"catalog": job.catalog["properties"], "options": job.options}
    quiet = TableSpec(catalog="lake", namespace="ns", name="events", format="toyparquet",
                      actions={"compact": {"min-files": 5}})
    out["quiet"] = factory.trigger(quiet, "compact", TriggerContext(datetime.now(UTC), catalog))
    reading = read_health(catalog, spec)
    out["health"] = [score_of(reading).score, [f.action for f in reading.findings]]
    out["files_view"] = format_view("toyparquet", "files")(catalog, spec)["totals"]["data_files"]
    out["details_view"] = format_view("toyparquet", "details") is None
    job_catalog = validated_catalog(job.catalog)
    out["session"] = session_conf(job_catalog)
    out["needs"] = catalog_needs(job_catalog)
    maintainer = format_maintainer(job_catalog, "compact")
    out["maintainer"] = [maintainer.__module__, maintainer.__name__, reads_own_table(job_catalog, maintainer)]
    built = build_dags([spec], default_factories(), catalogs={"lake": catalog})
    out["dags"] = sorted(built.dags)
    out["errors"] = [str(e) for e in built.errors] + list(FORMATS.errors.values())
    print(json.dumps(out, default=str))
    """
)


def test_a_fifth_format_is_found_through_its_entry_point_and_served_by_the_generic_code(
    tmp_path: Path,
) -> None:
    import json

    site = toy_distribution(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(TOY), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "wh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])

    assert "toyparquet" not in out["builtin"] and "toyparquet" in out["known"], out
    assert "action 'vacuum' is not supported by its format 'toyparquet'" in out["refused"]
    assert "supports: compact" in out["refused"]
    assert out["factory"] == "ToyParquetFactory"
    job = out["job"]
    assert job["catalog"]["tablemgmt.table-format"] == "toyparquet"
    assert job["options"]["table-location"].endswith("/wh/ns/events") and job["options"]["min-files"] == 2
    assert out["quiet"] is None  # 3 files, min-files 5: nothing to do
    assert out["health"] == [75, ["compact"]]
    assert out["files_view"] == 3 and out["details_view"] is True
    assert out["session"]["spark.sql.extensions"] == "" and not any(
        "iceberg" in str(v).lower() for v in out["session"].values()
    )
    assert out["needs"] == []
    assert out["maintainer"] == ["toyparquet.job", "compact", True]
    assert out["dags"] == ["tms__lake.ns.events__compact"] and not out["errors"], out
