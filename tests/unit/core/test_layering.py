"""core/ is the vocabulary: it must never import a framework (ruff TID251 enforces the same)."""

import ast
from pathlib import Path

import airflow_tablemgmt.core as core

BANNED = {"airflow", "pyspark", "sqlalchemy", "alembic", "fastapi", "pyiceberg", "starlette"}


def test_core_imports_no_framework() -> None:
    offenders = []
    for path in Path(core.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in BANNED]
    assert offenders == []


def test_core_also_banned_by_ruff_config() -> None:
    text = (Path(core.__file__).parent / "ruff.toml").read_text()
    for module in ("airflow", "pyspark", "sqlalchemy", "fastapi"):
        assert f'"{module}".msg' in text
