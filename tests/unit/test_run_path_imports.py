"""What a fresh ``tablemgmt run`` loads before it launches spark-submit.

Every module on that path is start-up time the maintenance run pays on top of the Iceberg procedure
(issue 14), so the path imports only what it uses: SQLAlchemy Core and the SQLite dialect, not the
ORM, PostgreSQL's dialect or Alembic; the process services, not the table, catalog, declaration and
dynamic-table ones; no YAML, Airflow, pyiceberg or pyspark; and the pydantic models that the run does
not validate are not built. Checked in fresh interpreters: one that only imports the path's modules,
one that runs the real command (a real SQLite store, the real CLI) up to the spark-submit launch, where
it stops before any JVM starts. No timings: the benchmark (benchmarks/job_overhead.py) measures them.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt import services
from airflow_tablemgmt.store import Store

RUN_PATH_MODULES = (
    "airflow_tablemgmt.cli",
    "airflow_tablemgmt.services.processes",
    "airflow_tablemgmt.store",
    "airflow_tablemgmt.lifecycle",
    "airflow_tablemgmt.factories.discovery",
    "airflow_tablemgmt.hooks.spark_job",
)
# Modules (and packages: their submodules too) that the run path must leave out.
NOT_ON_RUN_PATH = (
    "sqlalchemy.orm",
    "sqlalchemy.dialects.postgresql",
    "alembic",
    "yaml",
    "airflow",
    "fastapi",
    "pyiceberg",
    "pyspark",
    "croniter",
    "pendulum",
    "airflow_tablemgmt.services.catalogs",
    "airflow_tablemgmt.services.tables",
    "airflow_tablemgmt.services.declarations",
    "airflow_tablemgmt.services.dynamic",
    "airflow_tablemgmt.services.health",
    "airflow_tablemgmt.store.dynamic",
    "airflow_tablemgmt.store.declaration_files",
    "airflow_tablemgmt.core.dynamic",
    "urllib.request",  # the artifact resolver downloads only when a jar is missing
)
# pydantic models the run never validates: their validators are built on first use, not at import.
UNUSED_MODELS = (
    ("airflow_tablemgmt.core.actions", "RefreshSettings"),
    ("airflow_tablemgmt.formats.iceberg.actions", "ExpireDataSettings"),
    ("airflow_tablemgmt.formats.iceberg.actions", "ComputeStatsSettings"),
)

_REPORT = """
import importlib, json, sys
def report(extra=None):
    models = {f"{m}.{c}": bool(getattr(importlib.import_module(m), c).__pydantic_complete__)
              for m, c in %(models)r}
    # sys.__stdout__: the CLI sends everything printed during a run to stderr
    print("REPORT " + json.dumps({"modules": sorted(sys.modules), "built": models, **(extra or {})}),
          file=sys.__stdout__, flush=True)
"""

_IMPORT_ONLY = (
    _REPORT
    + """
for name in %(modules)r:
    importlib.import_module(name)
report()
"""
)

# The real command, stopped where it hands the job to spark-submit: the report, then exit at once.
_RUN_TO_LAUNCH = (
    _REPORT
    + """
import gc, os, subprocess
class _StopAtLaunch(subprocess.Popen):
    def __init__(self, args, *a, **k):
        if any("spark-submit" in str(x) for x in args):
            report({"argv": [str(x) for x in args], "collector_on": gc.isenabled(),
                    "frozen": gc.get_freeze_count()})
            os._exit(0)
        super().__init__(args, *a, **k)
subprocess.Popen = _StopAtLaunch
from airflow_tablemgmt.cli import main
sys.argv = ["tablemgmt", *sys.argv[1:]]
sys.exit(main())  # argv None: this process's own command line, as the tablemgmt script runs it
"""
)


def _fresh(program: str, *args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__SECRETS__")}
    env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
    params = {"modules": RUN_PATH_MODULES, "models": UNUSED_MODELS}
    res = subprocess.run(
        [sys.executable, "-c", program % params, *args], capture_output=True, text=True, env=env, timeout=120
    )
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("REPORT ")]
    assert lines, f"exit {res.returncode}\nstdout:\n{res.stdout[-2000:]}\nstderr:\n{res.stderr[-3000:]}"
    return dict(json.loads(lines[-1].removeprefix("REPORT ")))


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in NOT_ON_RUN_PATH)]


def test_importing_the_run_path_loads_no_heavy_module_and_builds_no_unused_model() -> None:
    report = _fresh(_IMPORT_ONLY)
    assert _heavy(report["modules"]) == []
    assert [name for name, built in report["built"].items() if built] == []


@pytest.fixture
def registered(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    services.set_catalog(store, services.build_catalog("lake", warehouse=str(tmp_path / "wh")))
    services.register_table(
        store, services.RegisterRequest(table="lake.db.orders", actions=("rewrite-files", "expire-snapshots"))
    )
    store.dispose()
    return url


def test_a_run_reaches_spark_submit_without_loading_heavy_modules(registered: str) -> None:
    report = _fresh(_RUN_TO_LAUNCH, "--store-url", registered, "run", "lake.db.orders", "rewrite-files")

    argv = report["argv"]
    assert Path(argv[0]).name == "spark-submit" and argv[-2:-1] == ["--spec"]  # the real job launch
    assert _heavy(report["modules"]) == []
    assert [name for name, built in report["built"].items() if built] == []
    # the start-up's objects are out of the collector's reach, and it is back on for the job
    assert report["collector_on"] and report["frozen"] > 10_000
    store = Store(registered)
    (process,) = store.processes.list(table_id="lake.db.orders")
    assert (process.action, str(process.status)) == ("rewrite-files", "SUBMITTED")  # the run was real
    store.dispose()


_COMMAND_LINE = """
import gc, sys
from airflow_tablemgmt.cli import main
sys.argv = ["tablemgmt", *sys.argv[1:]]
code = main()  # argv None: this process's own command line, as the tablemgmt script runs it
print("FROZEN", gc.get_freeze_count(), file=sys.__stdout__, flush=True)
sys.exit(code)
"""


def test_a_command_line_run_closes_its_store_and_skips_the_shutdown_collection(registered: str) -> None:
    database = Path(registered.removeprefix("sqlite:///"))
    res = subprocess.run(
        [sys.executable, "-c", _COMMAND_LINE, "--store-url", registered, "tables"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "lake.db.orders" in res.stdout
    frozen = int(res.stdout.split("FROZEN")[-1])
    assert frozen > 10_000  # the objects the imports made are out of the shutdown's collection
    # ... and the store was closed all the same: its last connection folded the WAL into the file
    assert not Path(f"{database}-wal").exists()


def test_every_service_name_is_still_importable_from_the_package() -> None:
    assert sorted(services.__all__) == sorted(services._EXPORTS)
    for name, module in services._EXPORTS.items():
        assert hasattr(importlib.import_module(f"airflow_tablemgmt.services.{module}"), name), name
    # the package resolves them on first use (``run_now`` is also the name of a submodule, which,
    # once imported, the import system puts in its place: the CLI takes it from services.processes)
    assert services.list_catalogs.__module__ == "airflow_tablemgmt.services.catalogs"


@pytest.mark.parametrize(("fmt", "action"), [("iceberg", "rewrite-files"), ("iceberg", "refresh")])
def test_a_run_gets_the_factory_default_factories_would_choose(fmt: str, action: str) -> None:
    from airflow_tablemgmt.factories.discovery import default_factories, factories_for

    chosen = factories_for(fmt, action).for_action(fmt, action)
    assert type(chosen) is type(default_factories().for_action(fmt, action))


def test_an_action_no_built_in_factory_runs_is_left_to_the_plugins() -> None:
    from airflow_tablemgmt.factories.discovery import default_factories, factories_for

    assert factories_for("iceberg", "no-such-action") is default_factories()
