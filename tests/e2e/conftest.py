"""End-to-end fixtures: Airflow's metadata DB migrated once, and a real Iceberg table on disk."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.table_writer import writer_url

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="session")
def airflow_db() -> str:
    res = run([str(BIN / "airflow"), "db", "migrate"], timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return os.environ["AIRFLOW_HOME"]


@dataclass
class IcebergTable:
    warehouse: Path
    table_id: str

    @property
    def metadata_dir(self) -> Path:
        catalog, ns, name = self.table_id.split(".")
        return self.warehouse / ns / name / "metadata"


def make_table(warehouse: Path, table_id: str, files: int, rows: int) -> IcebergTable:
    """A table written by Spark (``scripts/demo_table.py``), on this process's warm Connect server."""
    remote = writer_url()
    res = run(
        [
            sys.executable,
            str(ROOT / "scripts" / "demo_table.py"),
            "--warehouse",
            str(warehouse),
            "--table",
            table_id,
            "--files",
            str(files),
            "--rows",
            str(rows),
            *(["--remote", remote] if remote else []),
        ],
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return IcebergTable(warehouse, table_id)


@pytest.fixture
def dags_folder(tmp_path: Path) -> Iterator[Path]:
    folder = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", folder / "tablemgmt_dags.py")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
