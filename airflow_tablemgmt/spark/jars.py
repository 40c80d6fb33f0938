"""Where Iceberg's Spark runtime comes from: the jar shipped in a wheel, or Maven coordinates."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ICEBERG_VERSION = "1.10.2"
SPARK_SCALA = "3.5_2.12"
ICEBERG_MAVEN = f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_SCALA}:{ICEBERG_VERSION}"
JAR_PACKAGE = "snowpark_connect_deps_iceberg"
RUNTIME_JAR = f"iceberg-spark-runtime-{SPARK_SCALA}-{ICEBERG_VERSION}.jar"


def iceberg_runtime_jar() -> Path | None:
    """The runtime jar inside the installed ``snowpark-connect-deps-iceberg`` package, or None.

    Located with ``find_spec`` so the package is never imported (it is an install extra).
    """
    spec = importlib.util.find_spec(JAR_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jar = Path(location) / "jars" / RUNTIME_JAR
        if jar.is_file():
            return jar.resolve()
    return None
