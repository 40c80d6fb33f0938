"""Problems of declarations files: one :class:`DeclarationError` per bad entry (or per file).

Reading and parsing never raise; every problem becomes one of these, named by file, table, field path,
value and what is allowed, while the file's other entries still load. The exception a caller raises
for them is :class:`airflow_tablemgmt.core.errors.InvalidDeclaration`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeclarationError:
    """One table (or the file itself) that could not be loaded."""

    source: str
    table: str  # "catalog.namespace.name" as written, or "<file>"
    message: str


def file_error(source: str, message: str) -> DeclarationError:
    return DeclarationError(source, "<file>", f"{source}: {message}")


def short_message(e: BaseException, limit: int = 500) -> str:
    text = str(e)
    return text if len(text) <= limit else text[:limit] + "..."
