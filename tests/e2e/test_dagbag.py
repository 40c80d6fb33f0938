"""The shipped dags/ folder loads with no import errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.e2e


def test_shipped_dags_folder_has_no_import_errors(tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag

    for name in ("tablemgmt_dags.py", "tables.yaml"):
        shutil.copy(ROOT / "dags" / name, tmp_path / name)
    bag = DagBag(dag_folder=str(tmp_path))
    assert bag.import_errors == {}
