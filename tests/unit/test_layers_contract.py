"""The layering contract (pyproject.toml [tool.importlinter], docs/adr/0001-layers.md) holds: the
package's layers only point down, and the Spark driver side never imports the launcher, factories,
hooks, the lifecycle or the store. Runs the real ``lint-imports`` over the real package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports() -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    return subprocess.run(
        [exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_every_contract_is_kept() -> None:
    result = _lint_imports()
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout
    assert "layers point down KEPT" in result.stdout
    assert "never imports the launcher, factories or hooks KEPT" in result.stdout


def test_the_contract_rejects_an_upward_import(tmp_path: Path) -> None:
    """The contract is not vacuous: on a copy of the package where ``core`` imports the store, the same
    configuration fails and names that import."""
    import os

    shutil.copytree(
        ROOT / "airflow_tablemgmt",
        tmp_path / "airflow_tablemgmt",
        ignore=shutil.ignore_patterns("__pycache__", "ui"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    core_init = tmp_path / "airflow_tablemgmt" / "core" / "__init__.py"
    core_init.write_text(core_init.read_text() + "\nimport airflow_tablemgmt.store.leases  # noqa\n")
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    result = subprocess.run(
        [exe, "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode != 0
    assert "layers point down BROKEN" in result.stdout
    assert "airflow_tablemgmt.core -> airflow_tablemgmt.store.leases" in result.stdout
