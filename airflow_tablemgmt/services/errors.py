"""Errors the services raise beyond those in ``core.errors``; every one is a ``TableMgmtError``."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError


class InvalidInput(InvalidDeclaration):
    """A command's argument is malformed; the message names the argument, the value and what is allowed."""


class CatalogConflict(TableMgmtError):
    """Registering a table named a catalog that exists with other settings.

    Registering never changes a catalog (that would re-point every table in it); changing one is
    the explicit ``tablemgmt catalog set``.
    """


class DeclarationsRejected(TableMgmtError):
    """A declarations file has errors; nothing was applied. ``errors`` holds one message per problem."""

    def __init__(self, source: str, errors: Sequence[str]) -> None:
        self.source = source
        self.errors = list(errors)
        super().__init__(
            f"nothing applied: {len(self.errors)} error(s) in {source}: " + "; ".join(self.errors)
        )


class NotFound(TableMgmtError):
    """The named object (a dynamic table, a process) does not exist; the message says what is there."""


class Conflict(TableMgmtError):
    """The request contradicts the object's state or owner (suspending a suspended table, changing a
    table declared in tables.yaml, creating one that exists); nothing was changed."""


class DuplicateRun(TableMgmtError):
    """A run of this action at this instant exists already (a process or a DAG run)."""


class DiscoveryIncomplete(TableMgmtError):
    """A discovery pass could not list every catalog it names (unreachable, a namespace refused): what it
    could list was applied, nothing was retired from the others, and the run says which and why."""
