"""A format lives in its own package: outside ``airflow_tablemgmt/formats/`` no code names a format (a string
the code uses — a format's name, its Spark classes, its files — naming Delta, Hudi or Paimon), and every
built-in format has the same home. Docstrings and comments may mention formats as examples. (Iceberg, the
catalogs' own format, is named by the catalog and dynamic-table code: ADR 0003.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "airflow_tablemgmt"
FORMAT_WORD = re.compile(r"\b(?:hudi|hoodie|delta|paimon)\b", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def format_names_in(path: Path) -> list[str]:
    """The string constants of ``path``'s code (not its docstrings) that name a format."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    return [
        f"{where}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and FORMAT_WORD.search(node.value)
    ]


def generic_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "formats" not in p.relative_to(PACKAGE).parts[:1])


def test_the_check_finds_a_format_named_in_code(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""Delta and Hudi in a docstring are fine."""\nFMT = "hudi"\nX = f"{FMT}.delta"\n')
    assert [line.split(": ", 1)[1] for line in format_names_in(probe)] == ["'hudi'", "'.delta'"]


def test_no_generic_module_names_a_format() -> None:
    modules = generic_modules()
    assert len(modules) > 200
    found = [hit for path in modules for hit in format_names_in(path)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", ["iceberg", "delta", "hudi"])
def test_every_built_in_format_has_one_home(name: str) -> None:
    home = PACKAGE / "formats" / name
    assert {p.name for p in home.iterdir()} >= {
        "__init__.py",
        "actions.py",
        "factory.py",
        "marks.py",
        "views.py",
        "job",
    }
    assert (home / "job" / "__init__.py").read_text().count("MAINTAINERS") >= 1
    from airflow_tablemgmt.core.formats import FORMATS

    fmt = FORMATS.get(name)
    assert fmt.session.module == f"airflow_tablemgmt.formats.{name}.job"
    assert fmt.factory.startswith(f"airflow_tablemgmt.formats.{name}.factory:")
