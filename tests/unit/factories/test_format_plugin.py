"""A format plugin through the public API (plugins/paimon): its registration through the entry point, the
generic format x action check at registration, the job spec and session a plugin format's job gets, and
that the plugin imports nothing but the public API. Fast (no JVM): CI's part of the plugin's proof; the
end-to-end run is tests/integration/formats/test_paimon_plugin.py (TABLEMGMT_FORMATS_FULL=1)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.formats import FORMATS
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.declarations.parse import parse_declarations_text

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "plugins" / "paimon" / "tablemgmt_paimon"
PUBLIC = {"airflow_tablemgmt.formats.api", "airflow_tablemgmt.spark.job.plugins"}

installed = pytest.mark.skipif(
    importlib.util.find_spec("tablemgmt_paimon") is None and os.environ.get("CI") != "true",
    reason="the Paimon plugin is not installed: .venv/bin/pip install -e plugins/paimon",
)


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return out


def test_the_plugin_imports_only_the_public_api() -> None:
    files = sorted(PLUGIN.rglob("*.py"))
    assert len(files) >= 6
    private = {
        f"{p.relative_to(PLUGIN.parent)}: {m}"
        for p in files
        for m in _imports(p)
        if m.split(".")[0] == "airflow_tablemgmt" and m not in PUBLIC
    }
    assert not private, f"the plugin imports non-public modules: {sorted(private)}"


def test_the_plugins_driver_module_never_imports_the_factories() -> None:
    # What the Spark job imports by name (FormatSession.module): the driver contract holds for it too.
    code = (
        "import sys; import tablemgmt_paimon.job; "
        "bad = [m for m in sys.modules if m.startswith(('airflow_tablemgmt.factories', 'airflow_tablemgmt.store', "
        "'airflow_tablemgmt.hooks', 'airflow_tablemgmt.spark.launch', 'airflow_tablemgmt.lifecycle'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    env = {**os.environ, "PYTHONPATH": f"{PLUGIN.parent}{os.pathsep}{ROOT}"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]


def test_an_action_the_format_does_not_support_is_refused_naming_table_format_and_supported() -> None:
    loaded = parse_declarations_text(
        "version: 1\ncatalogs: [{name: lake, type: hadoop, warehouse: /w}]\n"
        "tables: [{catalog: lake, namespace: s, name: t, format: delta, actions: {rewrite-files: {}}}]\n",
        "tables.yaml",
    )
    assert not loaded.tables and len(loaded.errors) == 1
    text = str(loaded.errors[0])
    assert "table lake.s.t" in text and "'rewrite-files'" in text and "'delta'" in text, text
    assert "supports: optimize, vacuum" in text, text
    with pytest.raises(ValueError, match="the iceberg format supports: .*rewrite-files"):
        TableSpec(catalog="lake", namespace="s", name="t", actions={"optimize": {}})
    with pytest.raises(
        ValueError, match="'lance' is not a known table format; known: .*delta, hudi, iceberg"
    ):
        TableSpec(catalog="lake", namespace="s", name="t", format="lance")


def test_the_built_in_factories_agree_with_their_formats_declaration() -> None:
    from airflow_tablemgmt.factories.discovery import default_factories

    for factory in default_factories().factories.values():
        for fmt, actions in factory.supported_actions().items():
            assert actions <= FORMATS.supported(fmt), (factory.name, fmt)


@installed
def test_the_plugin_registers_through_the_entry_point_and_its_tables_validate() -> None:
    from airflow_tablemgmt.core.actions import ACTIONS
    from airflow_tablemgmt.factories.discovery import default_factories

    registry = default_factories()
    assert "paimon" in registry.factories and not registry.errors
    factory = registry.for_action("paimon", "compact")
    assert factory.supported_actions() == {
        "paimon": {"compact", "expire-snapshots", "expire-partitions", "remove-orphans"}
    }
    assert factory.descriptor.engines == ("spark-submit",)
    spec = TableSpec(
        catalog="lake",
        namespace="s",
        name="t",
        format="paimon",
        actions={
            "expire-snapshots": {"retain-max": 3},
            "compact": {"order-strategy": "zorder", "order-by": ["id"]},
        },
    )
    # the plugin's expire-snapshots has Paimon's options; an Iceberg table's keeps Iceberg's
    assert spec.action_settings("expire-snapshots").options()["retain-max"] == 3
    assert "retain-max" not in ACTIONS.get("expire-snapshots", "iceberg").settings_model.model_fields
    with pytest.raises(ValueError, match="retain-max"):
        TableSpec(catalog="lake", namespace="s", name="t", actions={"expire-snapshots": {"retain-max": 3}})
    with pytest.raises(ValueError, match="compact.order-by\\torder-strategy 'zorder' needs the columns"):
        TableSpec(
            catalog="lake",
            namespace="s",
            name="t",
            format="paimon",
            actions={"compact": {"order-strategy": "zorder"}},
        )
    with pytest.raises(ValueError, match="the paimon format supports: compact, expire-partitions"):
        TableSpec(catalog="lake", namespace="s", name="t", format="paimon", actions={"vacuum": {}})


@installed
def test_a_plugin_formats_job_names_its_module_and_gets_its_session_alone(tmp_path: Path) -> None:
    from airflow_tablemgmt.core.factory import TriggerContext
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.spark.conf import launch_conf, session_conf, validated_catalog
    from airflow_tablemgmt.spark.launch.artifacts import catalog_needs

    factory = default_factories().for_action("paimon", "remove-orphans")
    catalog = CatalogSpec(name="lake", type="hadoop", warehouse=str(tmp_path))
    spec = TableSpec(catalog="lake", namespace="s", name="t", format="paimon", actions={"remove-orphans": {}})
    job = factory.trigger(spec, "remove-orphans", TriggerContext(datetime.now(UTC), catalog))
    assert job is not None
    props = job.catalog["properties"]
    # the format's name only: the driver finds the format's module among the installed formats
    assert props["tablemgmt.table-format"] == "paimon" and "tablemgmt.format-module" not in props
    assert job.options["dry-run"] is True and "first run of remove-orphans" in job.options["dry-run-reason"]
    job_catalog = validated_catalog(job.catalog)
    conf = session_conf(job_catalog)
    assert conf["spark.sql.extensions"] == "org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions"
    assert conf["spark.sql.catalog.lake"] == "org.apache.paimon.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.warehouse"] == str(tmp_path)
    assert not any(
        "iceberg" in v.lower() or "delta" in v.lower() or "hudi" in v.lower() for v in conf.values()
    )
    assert catalog_needs(job_catalog) == ["paimon"]
    assert "spark.sql.catalog.lake" not in launch_conf(job_catalog)


def test_a_job_spec_naming_a_format_that_is_not_installed_imports_nothing() -> None:
    """The driver imports only an installed format's module: a job spec's module name is never imported."""
    from airflow_tablemgmt.spark.conf import table_format
    from airflow_tablemgmt.spark.errors import InvalidJobSpec

    def catalog(fmt: str, module: str) -> CatalogSpec:
        props = {"tablemgmt.table-format": fmt, "tablemgmt.format-module": module}
        return CatalogSpec(name="lake", type="hadoop", warehouse="/w", properties=props)

    before = set(sys.modules)
    with pytest.raises(
        InvalidJobSpec, match="unknown format 'nosuchformat'; installed: .*delta, hudi, iceberg"
    ):
        table_format(catalog("nosuchformat", "json"))
    with pytest.raises(InvalidJobSpec, match="unknown format 'os; rm'"):
        table_format(catalog("os; rm", "os"))
    assert "json" in before or "json" not in sys.modules
    # an installed format's job finds its own module whatever the spec says
    assert table_format(catalog("delta", "json")) == "delta"


@installed
def test_cli_and_rest_registration_refuse_an_unsupported_action_and_dags_are_built(tmp_path: Path) -> None:
    from airflow_tablemgmt.core.tables import Owner
    from airflow_tablemgmt.dag_factory.build import build_dags
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.services.tables import RegisterRequest, register_table
    from airflow_tablemgmt.store import Store

    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    catalog = CatalogSpec(name="lake", type="hadoop", warehouse=str(tmp_path))
    store.catalogs.upsert(catalog, Owner.STORE)
    # the path `tablemgmt register` and POST /tables share
    with pytest.raises(
        Exception, match="action 'rewrite-files' is not supported by its format 'paimon'"
    ) as e:
        register_table(store, RegisterRequest(table="lake.s.t", format="paimon", actions=["rewrite-files"]))
    assert "table lake.s.t" in str(e.value) and "supports: compact, expire-partitions" in str(e.value)
    register_table(
        store, RegisterRequest(table="lake.s.t", format="paimon", actions=["compact", "remove-orphans"])
    )
    spec = store.tables.get("lake.s.t")
    assert spec.format == "paimon" and spec.enabled_actions() == ["compact", "remove-orphans"]
    built = build_dags([spec], default_factories(), catalogs={"lake": catalog})
    assert not built.errors
    assert sorted(built.dags) == ["tms__lake.s.t__compact", "tms__lake.s.t__remove-orphans"]
    assert "paimon" in built.dags["tms__lake.s.t__compact"].tags
