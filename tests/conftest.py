"""Test-wide Airflow settings: an isolated AIRFLOW_HOME, set before anything imports airflow.

Also the fault suite's figures table at the end of the run: the figures come with the test reports
(tests/faults/conftest.py), so the table is complete when pytest-xdist ran the tests in other processes.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

_HOME = tempfile.mkdtemp(prefix="tms-airflow-home-")
os.environ["AIRFLOW_HOME"] = _HOME
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = os.path.join(_HOME, "dags")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = '{"conn_type": "spark", "host": "local[2]"}'
os.environ["TABLEMGMT_STORE_URL"] = f"sqlite:///{os.path.join(_HOME, 'tablemgmt.db')}"
# The health gate (formats/base.py: a run that does not pay is skipped) is off for the suite's scenarios,
# which run actions on tables a few files small to prove the jobs themselves; the gate's own tests turn it
# on (tests/unit/formats/test_health_gate.py, tests/integration/formats/test_health_gate_spark.py).
os.environ.setdefault("TABLEMGMT_HEALTH_GATE", "0")
os.makedirs(os.environ["AIRFLOW__CORE__DAGS_FOLDER"], exist_ok=True)
# One Fernet key for this test process and every Airflow subprocess it starts: a trigger row written
# (encrypted) by a subprocess's ``dag.test()`` must decrypt in the next in-process ``dag.test()``, which
# reads every trigger row of the shared test DB. Without it, a subprocess that finds a generated
# ``fernet_key`` in airflow.cfg encrypts with it while this process (configured before the file
# existed) reads with none.
if not os.environ.get("AIRFLOW__CORE__FERNET_KEY"):
    from cryptography.fernet import Fernet

    os.environ["AIRFLOW__CORE__FERNET_KEY"] = Fernet.generate_key().decode()

# TABLEMGMT_FULL=1: everything CI leaves for on-demand runs (keeps CI under 30 minutes): the tests marked
# ``on_demand`` below and every area's own switch.
ON_DEMAND_SWITCHES = (
    "TABLEMGMT_CATALOG_MATRIX",
    "TABLEMGMT_FORMATS_FULL",
    "TABLEMGMT_CONNECT_FAULTS",
    "TABLEMGMT_NOTIFY_FULL",
)
FULL = os.environ.get("TABLEMGMT_FULL") == "1"
if FULL:
    for _switch in ON_DEMAND_SWITCHES:
        os.environ.setdefault(_switch, "1")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """A test marked ``on_demand`` (a long scenario whose guarantee a shorter CI test also covers,
    named in its marker's reason) is skipped unless ``TABLEMGMT_FULL=1``."""
    if FULL:
        return
    import pytest

    for item in items:
        marker = item.get_closest_marker("on_demand")
        if marker is not None:
            why = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
            item.add_marker(pytest.mark.skip(reason=f"on demand (TABLEMGMT_FULL=1): {why}"))


_FAULT_FIGURES: list[dict[str, Any]] = []


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "teardown":  # the figures fixture has finished by then
        # tests.faults.conftest.FIGURES_PROPERTY (not imported: this runs for every test)
        _FAULT_FIGURES.extend(
            value for name, value in report.user_properties if name == "tablemgmt_fault_figures"
        )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _FAULT_FIGURES:
        from tests.faults.conftest import ROUNDS, Figures, figures_table

        terminalreporter.section(f"fault-injection figures (TABLEMGMT_FAULT_ROUNDS={ROUNDS})")
        for line in figures_table([Figures(**f) for f in _FAULT_FIGURES]):
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Stop this process's table-writing Spark Connect server, if a test started one."""
    import sys

    writer = sys.modules.get("tests.support.table_writer")
    if writer is not None:
        writer.stop()
