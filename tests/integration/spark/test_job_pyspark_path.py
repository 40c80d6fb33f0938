"""The job's driver imports pyspark and py4j from the installed packages, not from the zip files
spark-submit puts first on PYTHONPATH, when both are the same code (a pip-installed pyspark is its own
SPARK_HOME): a zip holds no compiled bytecode, so every run compiled pyspark again (≈ 0.25 s)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pyspark

from airflow_tablemgmt.spark.job.main import installed_spark_zips

PKG = Path(pyspark.__file__).resolve().parent
LIB = PKG / "python" / "lib"
PY4J = importlib.metadata.version("py4j")


def test_the_installed_pysparks_own_zips_are_dropped() -> None:
    path = [str(LIB / "pyspark.zip"), str(LIB / f"py4j-{PY4J}-src.zip"), "/elsewhere"]
    assert installed_spark_zips(path) == path[:2]


def test_a_spark_distributions_zips_are_kept(tmp_path: Path) -> None:
    lib = tmp_path / "spark" / "python" / "lib"
    path = [str(lib / "pyspark.zip"), str(lib / f"py4j-{PY4J}-src.zip")]
    assert installed_spark_zips(path) == []


def test_a_py4j_zip_of_another_version_is_kept() -> None:
    path = [str(LIB / "pyspark.zip"), str(LIB / "py4j-0.10.9.1-src.zip")]
    assert installed_spark_zips(path) == [path[0]]


def test_under_spark_submit_pyspark_comes_from_the_package(tmp_path: Path) -> None:
    """The real thing: spark-submit's PythonRunner runs a program that imports job_main first."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import airflow_tablemgmt.spark.job.main, pyspark, py4j, sys\n"
        "print('PYSPARK', pyspark.__file__)\nprint('PY4J', py4j.__file__)\n"
    )
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    env = {**os.environ, "JAVA_HOME": resolve_java_home(), "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run(
        [str(PKG / "bin" / "spark-submit"), "--master", "local[1]", str(probe)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    ).stdout
    found = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith(("PYSPARK", "PY4J")))
    assert ".zip" not in found["PYSPARK"] and Path(found["PYSPARK"]).resolve().parent == PKG
    # py4j's zip goes only when the installed py4j is the zip's version (the JVM side's jar matches the zip).
    (py4j_zip,) = LIB.glob("py4j-*-src.zip")
    same = py4j_zip.name == f"py4j-{PY4J}-src.zip"
    assert (".zip" in found["PY4J"]) is not same
