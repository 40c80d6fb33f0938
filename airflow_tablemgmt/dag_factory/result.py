"""What a parse of the DAG file produces: its DAGs and the declaration errors it reports.

A module of its own so that each path of the DAG file (``dag_file.py``) imports only what it builds with: a
task start of a planned or discovery DAG does not import the tables' DAG builder (``build.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk import DAG


@dataclass
class BuildResult:
    dags: dict[str, DAG] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
