"""The Java major version comes from the runtime's ``release`` file before any JVM is started."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from airflow_tablemgmt.spark.launch.java import java_major, release_major


def _jdk(root: Path, release: str | None, version_output: str) -> Path:
    """A runtime layout whose ``bin/java`` is a script printing ``version_output`` and leaving a mark."""
    (root / "bin").mkdir(parents=True)
    java = root / "bin" / "java"
    java.write_text(f"#!/bin/sh\ntouch '{root}/ran'\necho '{version_output}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    if release is not None:
        (root / "release").write_text(release)
    return java


@pytest.mark.parametrize(
    ("release", "major"),
    [
        ('IMPLEMENTOR="Debian"\nJAVA_VERSION="17.0.15"\nJAVA_VERSION_DATE="2025-04-15"\n', 17),
        ('JAVA_VERSION="1.8.0_392"\nOS_NAME="Linux"\n', 8),
        ('JAVA_VERSION="11"\n', 11),
    ],
)
def test_release_file_answers_without_running_java(tmp_path: Path, release: str, major: int) -> None:
    java = _jdk(tmp_path, release, 'openjdk version "21.0.1"')
    assert release_major(java) == major
    assert java_major(java) == major
    assert not (tmp_path / "ran").exists()


def test_release_file_found_through_a_symlinked_binary(tmp_path: Path) -> None:
    java = _jdk(tmp_path / "jdk", 'JAVA_VERSION="17.0.2"\n', 'openjdk version "21"')
    link = tmp_path / "usr-bin-java"
    os.symlink(java, link)
    assert java_major(link) == 17
    assert not (tmp_path / "jdk" / "ran").exists()


@pytest.mark.parametrize("release", [None, 'IMPLEMENTOR="x"\n', 'JAVA_VERSION="garbage"\n'])
def test_without_a_usable_release_file_java_is_asked(tmp_path: Path, release: str | None) -> None:
    java = _jdk(tmp_path, release, 'openjdk version "11.0.22" 2024-01-16')
    assert release_major(java) is None
    assert java_major(java) == 11
    assert (tmp_path / "ran").exists()
