"""Under ``CI=true`` a Spark/Iceberg suite whose prerequisite is missing fails instead of skipping (issue 9, item 20).

Each case runs one real test of a Spark/Iceberg suite in a child pytest whose import path puts an
empty ``snowpark_connect_deps_iceberg`` package first and an empty jar cache with downloads off, so the
Iceberg runtime jar is not available.
The child fails in the fixture, before any JVM starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[2]
SUITES = [  # one test per session fixture that needs the jar
    "tests/integration/spark/test_spark_compaction.py::test_sort_column_must_exist",
    "tests/integration/triggers/test_snapshot_triggers.py::test_watcher_fires_on_a_commit_made_after_it_started",
    "tests/integration/metadata/test_iceberg_reader.py::test_table_without_snapshot",
]


def child_pytest(shadow: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), str(ROOT)])
    # Nor in an (empty) jar cache, with downloads from Maven off: an offline worker without the wheel.
    env["AIRFLOW__TABLEMGMT__JARS_DIR"] = str(shadow / "jars")
    env["AIRFLOW__TABLEMGMT__JARS_OFFLINE"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *SUITES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def shadow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("no-jar")
    (root / "snowpark_connect_deps_iceberg").mkdir()
    (root / "snowpark_connect_deps_iceberg" / "__init__.py").write_text("")  # no jars/ inside
    return root


@pytest.mark.timeout(300)
def test_missing_iceberg_jar_fails_under_ci(shadow: Path) -> None:
    res = child_pytest(shadow, "true")
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert "Iceberg runtime jar not available" in out, out[-3000:]
    assert "tablemgmt jars fetch --format iceberg" in out, out[-3000:]
    summary = out.strip().splitlines()[-1]
    assert "3 errors" in summary and "skipped" not in summary, out[-3000:]
    assert out.count("CI=true: a missing prerequisite fails instead of skipping") >= 3, out[-3000:]
