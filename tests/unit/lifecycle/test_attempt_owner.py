"""An attempt's state has one owner (issue 38): the attempt's steps, its guards and the takeover read the
runner's public settings only, and nothing outside the runner reaches into a runner's private fields."""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_tablemgmt

PACKAGE = Path(airflow_tablemgmt.__file__).parent


def _private_runner_reads(path: Path) -> list[str]:
    """``runner._x`` / ``self._runner._x`` in ``path``: a private field read through a runner."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        name = (
            owner.id
            if isinstance(owner, ast.Name)
            else owner.attr
            if isinstance(owner, ast.Attribute)
            else ""
        )
        if name in ("runner", "_runner"):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}.{node.attr}")
    return found


def test_no_module_reads_a_runners_private_fields() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert any(p.name == "attempt.py" for p in modules)  # the scan sees the lifecycle
    assert [hit for p in modules for hit in _private_runner_reads(p)] == []


def test_the_runners_private_field_protocol_is_gone() -> None:
    from airflow_tablemgmt.lifecycle import model

    assert not hasattr(model, "RunnerState")
