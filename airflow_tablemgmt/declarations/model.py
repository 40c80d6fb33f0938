"""What loading declarations produces: one :class:`LoadedDeclarations` per file, and the
:class:`FileSet` of one DAG-file parse (every file of ``tables.yaml`` + ``tables.d/*.yaml``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.policies import Policy
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.declarations.errors import DeclarationError
from airflow_tablemgmt.store.declaration_files import DeclarationFileRecord

if TYPE_CHECKING:  # an annotation only: a table's task start loads this module and no dynamic table
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec


@dataclass
class LoadedDeclarations:
    source: str
    catalogs: list[CatalogSpec] = field(default_factory=list)
    tables: list[TableSpec] = field(default_factory=list)
    errors: list[DeclarationError] = field(default_factory=list)
    digest: str = ""
    # True only when the file parsed as a mapping with an explicit ``tables:`` list (even empty).
    # A missing, empty, ``{}``/``null`` or unreadable file declares nothing, so it never prunes.
    declares_tables: bool = False
    # table id -> hash of its entry (see entry_digest), for each table that validated.
    entry_digests: dict[str, str] = field(default_factory=dict)
    # How many tables reused their stored validated form instead of validating again.
    reused: int = 0
    # ``dynamic-tables:`` entries that validated; each one's maintenance view
    # (``DynamicTableSpec.table_spec()``, action ``refresh``) is also in ``tables``.
    dynamic_tables: list[DynamicTableSpec] = field(default_factory=list)
    # The name of every ``dynamic-tables:`` entry, also of those with errors.
    dynamic_names: set[str] = field(default_factory=set)
    # ``policies:`` entries that validated (declarations/policies.py), and whether the file has the key.
    policies: list[Policy] = field(default_factory=list)
    declares_policies: bool = False

    def raise_for_errors(self) -> None:
        if self.errors:
            raise InvalidDeclaration("\n".join(e.message for e in self.errors))

    def may_prune(self, *, allow_empty_prune: bool = False) -> bool:
        """Whether code-owned tables missing from this file may be removed from the store.

        Only a file that parsed without any error and declares ``tables:`` (or ``dynamic-tables:``)
        explicitly; an explicit ``tables: []`` (which would remove every code-owned table) only
        when asked. Dynamic tables count as tables: a clean file listing at least one table or
        dynamic table prunes the code-owned tables and dynamic tables it no longer lists.
        """
        if self.errors or not self.declares_tables:
            return False
        return bool(self.tables) or allow_empty_prune


@dataclass
class ParsedDocument:
    """A document loaded and its catalogs validated; its tables not yet (they may name catalogs
    other files declare)."""

    out: LoadedDeclarations
    raw_tables: list[Any] | None = None
    raw_dynamic: list[Any] | None = None


ReuseValidated = Callable[[str, str], "TableSpec | None"]


@dataclass
class FileSet:
    """Every declarations file of one parse, loaded (from the store's record or the YAML)."""

    files: list[LoadedDeclarations]
    records: dict[str, DeclarationFileRecord]
    # Sources loaded from YAML this parse (their record is rewritten after a clean sync).
    parsed: set[str] = field(default_factory=set)
    contexts: dict[str, str] = field(default_factory=dict)
    # The store's dynamic tables by id (read only when a parsed file declares dynamic tables);
    # None when they could not be read.
    stored_dynamic: dict[str, Any] | None = field(default_factory=dict)
    # Files whose errors depend on more than their bytes (a dynamic table's upstreams): not recorded,
    # so the next parse checks them again.
    unrecorded: set[str] = field(default_factory=set)

    @property
    def errors(self) -> list[str]:
        return [e.message for f in self.files for e in f.errors]

    @property
    def declared(self) -> dict[str, TableSpec]:
        return {t.id: t for f in self.files for t in f.tables}
