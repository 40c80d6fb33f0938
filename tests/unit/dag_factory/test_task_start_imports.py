"""What a task start imports: Airflow parses the DAG file for the one DAG whose task starts
(``get_parsing_context()``), and that parse pays for every module the file imports (issue 40's single-DAG
parse budget, ``benchmarks/dag_parse.py``). A planned or discovery DAG's task start must not import the
declarations, the tables' DAG builder, their operator and lifecycle, the planner or discovery's catalog
listing; a table's task start must not import the policies' DAG modules, nor what only its run needs (the
lifecycle, the engines), the store's repositories its DAG does not read, a full parse's sync or the other
formats.

The shipped ``dags/tablemgmt_dags.py`` runs in a fresh interpreter (this test process has imported most of
the package already) that imports Airflow once and forks once per DAG id, as Airflow's task runner is forked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import airflow_tablemgmt
from airflow_tablemgmt.core.naming import dag_id_for, discovery_dag_id, plan_dag_id
from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository
from airflow_tablemgmt.store.policies import PolicyRepository

DAG_FILE = Path(__file__).resolve().parents[3] / "dags" / "tablemgmt_dags.py"
PLANNED = plan_dag_id("fleet", "rewrite-files")
DISCOVERY = discovery_dag_id("fleet")
DECLARED = dag_id_for("lake.own.declared", "rewrite-files")

# Modules only a full parse or another kind of DAG needs, with what they would bring.
NOT_AT_A_POLICY_TASK_START = [
    "airflow_tablemgmt.dag_factory.build",  # the tables' DAGs: their operator, lifecycle, failure callback
    "airflow_tablemgmt.dag_factory.cache",
    "airflow_tablemgmt.declarations.registry",  # the declarations files and their sync
    "airflow_tablemgmt.declarations.sync",
    "airflow_tablemgmt.store.effective",
    "airflow_tablemgmt.operators.maintenance",
    "airflow_tablemgmt.lifecycle",
    "airflow_tablemgmt.notifications.callback",
    "airflow_tablemgmt.services.enrolment",  # discovery's service and its catalog listing
    "airflow_tablemgmt.metadata.discovery",
    "airflow_tablemgmt.services.plan_runs",  # the planner: what the plan task runs, not its DAG
    "airflow_tablemgmt.services.planning",
    "airflow_tablemgmt.metadata.planning",
]
NOT_AT_A_PLAN_TASK_START = [
    *NOT_AT_A_POLICY_TASK_START,
    "airflow.providers.standard.operators.python",  # the @task decorator's (and packaging's parsers)
    # format plugins scanned for and imported, when one of this package's formats has the action
    "airflow_tablemgmt.formats.api",
    "tablemgmt_paimon",
]
NOT_AT_A_TABLE_TASK_START = [
    "airflow_tablemgmt.dag_factory.plan",
    "airflow_tablemgmt.dag_factory.discovery",
    "airflow_tablemgmt.dag_factory.cache",
    "airflow_tablemgmt.services.enrolment",
    "airflow_tablemgmt.services.plan_runs",
    "airflow_tablemgmt.metadata.planning",
    "airflow_tablemgmt.formats.api",  # its format and actions are this package's: no plugin loaded
    "tablemgmt_paimon",
]

# What a table's task start leaves to the run (its execute) or to a full parse: the parse builds the DAG and
# its one operator, reads one table row, the catalogs and the policies, and loads the table's own format only.
NOT_IN_A_TABLE_TASK_START_PARSE = [
    "airflow_tablemgmt.lifecycle",  # the run: its lifecycle, engine, lineage and lease-wait trigger
    "airflow_tablemgmt.hooks.engine",
    "airflow_tablemgmt.spark.launch",
    "airflow_tablemgmt.lineage",
    "airflow.providers.standard.triggers.temporal",
    "airflow_tablemgmt.store.processes",  # the store's repositories a DAG does not read
    "airflow_tablemgmt.store.leases",
    "airflow_tablemgmt.declarations.sync",  # a full parse's: the files' sync and cross-file checks
    "airflow_tablemgmt.declarations.checks",
    "airflow_tablemgmt.core.dynamic.spec",  # the dynamic tables' models
    "airflow_tablemgmt.formats.hudi",  # the other formats (the declared table is an Iceberg table)
    "airflow_tablemgmt.formats.delta",
]

CHILD = r"""
import json, os, runpy, sys
import airflow.sdk  # imported once, before the forks (as the task runner has it)
out = {}
for dag_id in sys.argv[2:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.environ["_AIRFLOW_PARSING_CONTEXT_DAG_ID"] = dag_id
        before = set(sys.modules)
        names = runpy.run_path(sys.argv[1])
        dags = sorted(k for k, v in names.items() if type(v).__name__ == "DAG")
        loaded = sorted(set(sys.modules) - before)
        os.write(w, json.dumps({"dags": dags, "loaded": loaded}).encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.waitpid(pid, 0)
    out[dag_id] = json.loads(b"".join(chunks) or b"{}")
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def task_starts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[str]]]:
    """Each DAG id's task start in a forked child of one fresh interpreter: the DAGs it built, the modules
    it imported."""
    home = tmp_path_factory.mktemp("home")
    dags = home / "dags"
    dags.mkdir()
    (dags / DAG_FILE.name).write_text(DAG_FILE.read_text())
    url = f"sqlite:///{home / 'tablemgmt.db'}"
    store = Store(url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(home / "wh")), Owner.STORE)
    actions = {"rewrite-files": {}, "expire-snapshots": {}}
    policy = parse_policy(
        {"name": "fleet", "match": {"catalog": "lake", "format": "iceberg"}, "actions": actions}
    )
    PolicyRepository.of(store).upsert(policy, Owner.STORE)
    for i in range(3):
        spec = TableSpec(catalog="lake", namespace="s", name=f"t{i}", actions=dict(actions))
        EnrolmentRepository.of(store).enrol(spec, "fleet", "matched")
    declared = TableSpec(catalog="lake", namespace="own", name="declared", actions={"rewrite-files": {}})
    store.tables.upsert(declared, Owner.STORE)
    store.dispose()
    package_root = str(Path(airflow_tablemgmt.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "TABLEMGMT_STORE_URL": url,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # the package this test imports, not another install of it
        "PYTHONPATH": os.pathsep.join([package_root, *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    env.pop("AIRFLOW_CONN_TABLEMGMT_DEFAULT", None)
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(dags / DAG_FILE.name), PLANNED, DISCOVERY, DECLARED],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=300,
    )
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, res.stderr[-4000:]
    return json.loads(line[len("RESULT ") :])


def _imported(loaded: list[str], modules: list[str]) -> list[str]:
    return [m for m in modules if m in loaded]


def test_a_planned_dag_task_start_imports_only_what_its_dag_needs(
    task_starts: dict[str, dict[str, list[str]]],
) -> None:
    start = task_starts[PLANNED]
    assert start["dags"] == [PLANNED]
    assert "airflow_tablemgmt.dag_factory.plan" in start["loaded"]  # the measurement saw the parse
    assert _imported(start["loaded"], NOT_AT_A_PLAN_TASK_START) == []


def test_a_discovery_dag_task_start_imports_neither_the_declarations_nor_the_tables_builder(
    task_starts: dict[str, dict[str, list[str]]],
) -> None:
    start = task_starts[DISCOVERY]
    assert start["dags"] == [DISCOVERY]
    assert _imported(start["loaded"], NOT_AT_A_POLICY_TASK_START) == []


def test_a_table_task_start_imports_none_of_the_policies_dag_modules(
    task_starts: dict[str, dict[str, list[str]]],
) -> None:
    start = task_starts[DECLARED]
    assert start["dags"] == [DECLARED]
    assert "airflow_tablemgmt.dag_factory.build" in start["loaded"]
    assert _imported(start["loaded"], NOT_AT_A_TABLE_TASK_START) == []


def test_a_table_task_start_parse_leaves_the_run_and_the_other_formats_alone(
    task_starts: dict[str, dict[str, list[str]]],
) -> None:
    start = task_starts[DECLARED]
    assert start["dags"] == [DECLARED]
    assert "airflow_tablemgmt.operators.maintenance" in start["loaded"]  # the DAG's operator is built
    assert "airflow_tablemgmt.formats.iceberg" in start["loaded"]
    loaded = [
        m
        for m in start["loaded"]
        if any(m == n or m.startswith(n + ".") for n in NOT_IN_A_TABLE_TASK_START_PARSE)
    ]
    assert loaded == []


def test_the_action_name_bound_covers_every_builtin_action() -> None:
    """A table id is checked against the built-in actions' names only when it is long enough for one to
    matter (``core/tables.py``): the bound must be at least the longest of them, and a table validates as it
    did against every name."""
    from airflow_tablemgmt.core.actions import ACTIONS
    from airflow_tablemgmt.core.naming import ACTION_NAME_BOUND, dag_id_length_problem
    from airflow_tablemgmt.core.tables import TableSpec

    assert max(len(n) for n in ACTIONS.names()) <= ACTION_NAME_BOUND
    actions = {"expire-snapshots": {}}
    for length in (20, 100, 101, 120, 250):
        namespace, name = "s" * min(length // 2, 128), "n" * min(length - length // 2, 128)
        expected = dag_id_length_problem(f"lake.{namespace}.{name}", [*ACTIONS.names(), *actions])
        try:
            TableSpec(catalog="lake", namespace=namespace, name=name, actions=actions)
            problem = None
        except ValueError as e:
            problem = str(e)
        assert (problem is None) == (expected is None), (length, problem)
        assert expected is None or expected in str(problem)


def test_a_format_loaded_alone_keeps_the_builtin_order() -> None:
    """``FORMATS.find`` loads only the named one of this package's formats; ``builtin()`` still lists them all
    in entry-point order."""
    from airflow_tablemgmt.core.formats import FormatRegistry

    everything = [f.name for f in FormatRegistry().builtin()]
    registry = FormatRegistry()
    assert registry.builtin_format(everything[-1]) is not None
    assert [f.name for f in registry.loaded()] == [everything[-1]]
    assert registry.builtin_format("no-such-format") is None and len(registry.loaded()) == 1
    assert [f.name for f in registry.builtin()] == everything


def test_the_declarations_fingerprint_loads_no_format() -> None:
    """A task start of a table declared in a file checks the file's record against this fingerprint; it
    hashes the formats' sources, and must not load every built-in format to list their actions."""
    code = (
        "import sys\n"
        "from airflow_tablemgmt.declarations.parse import validation_fingerprint\n"
        "validation_fingerprint()\n"
        "print(sorted(m for m in sys.modules if m.startswith('airflow_tablemgmt.formats.')))\n"
    )
    package_root = str(Path(airflow_tablemgmt.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": package_root}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]"
