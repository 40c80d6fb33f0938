"""Table declarations kept as code: ``dags/tables.yaml`` -> validated specs -> the store.

Each table is validated on its own, so one bad entry is reported by name (file, table, field path,
value, what is allowed) while the others still load. Tables declared here are owned by code: REST
and the CLI refuse to change them.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec, format_validation_error

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

TABLES_YAML_ENV = "TABLEMGMT_TABLES_YAML"


@dataclass(frozen=True)
class DeclarationError:
    """One table (or the file itself) that could not be loaded."""

    source: str
    table: str  # "catalog.namespace.name" as written, or "<file>"
    message: str


@dataclass
class LoadedDeclarations:
    source: str
    catalogs: list[CatalogSpec] = field(default_factory=list)
    tables: list[TableSpec] = field(default_factory=list)
    errors: list[DeclarationError] = field(default_factory=list)
    digest: str = ""

    def raise_for_errors(self) -> None:
        if self.errors:
            raise InvalidDeclaration("\n".join(e.message for e in self.errors))


def default_tables_yaml() -> Path:
    """``$TABLEMGMT_TABLES_YAML``, else ``<dags folder>/tables.yaml``."""
    if os.environ.get(TABLES_YAML_ENV):
        return Path(os.environ[TABLES_YAML_ENV])
    dags = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER") or os.path.join(
        os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "dags"
    )
    return Path(dags) / "tables.yaml"


def _name_of(raw: Any) -> str:
    if isinstance(raw, dict):
        return f"{raw.get('catalog')}.{raw.get('namespace')}.{raw.get('name')}"
    return repr(raw)


def parse_declarations_text(text: str, source: str) -> LoadedDeclarations:
    out = LoadedDeclarations(source=source, digest=hashlib.sha256(text.encode()).hexdigest())
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        out.errors.append(DeclarationError(source, "<file>", f"{source}: not valid YAML: {e}"))
        return out
    if not isinstance(data, dict):
        out.errors.append(
            DeclarationError(source, "<file>", f"{source}: expected a mapping with 'catalogs' and 'tables'")
        )
        return out
    unknown = set(data) - {"version", "catalogs", "tables"}
    if unknown:
        out.errors.append(
            DeclarationError(
                source,
                "<file>",
                f"{source}: unknown top-level keys {sorted(unknown)}; allowed: version, catalogs, tables",
            )
        )
    if data.get("version", 1) != 1:
        out.errors.append(
            DeclarationError(source, "<file>", f"{source}: version: must be 1, got {data.get('version')!r}")
        )
    raw_catalogs = data.get("catalogs") or []
    if isinstance(raw_catalogs, dict):  # mapping form: {name: {type, warehouse}}
        raw_catalogs = [{"name": k, **(v or {})} for k, v in raw_catalogs.items()]
    for i, raw in enumerate(raw_catalogs):
        try:
            out.catalogs.append(CatalogSpec.model_validate(raw))
        except ValidationError as e:
            msg = format_validation_error(e, source, path_prefix=f"catalogs[{i}]")
            out.errors.append(
                DeclarationError(source, f"catalog {raw.get('name') if isinstance(raw, dict) else i}", msg)
            )
    catalog_names = {c.name for c in out.catalogs}
    seen: set[str] = set()
    raw_tables = data.get("tables") or []
    if not isinstance(raw_tables, list):
        out.errors.append(DeclarationError(source, "<file>", f"{source}: tables: expected a list of tables"))
        raw_tables = []
    for i, raw in enumerate(raw_tables):
        name = _name_of(raw)
        try:
            spec = TableSpec.model_validate(raw)
        except ValidationError as e:
            msg = format_validation_error(e, source, path_prefix=f"tables[{i}]", label=f"table {name}")
            out.errors.append(DeclarationError(source, name, msg))
            continue
        if spec.catalog not in catalog_names:
            out.errors.append(
                DeclarationError(
                    source,
                    name,
                    f"{source}: tables[{i}].catalog (table {name}): {spec.catalog!r} is not declared; "
                    f"declared catalogs: {', '.join(sorted(catalog_names)) or 'none'}",
                )
            )
            continue
        if spec.id in seen:
            out.errors.append(
                DeclarationError(source, name, f"{source}: tables[{i}] (table {name}): declared twice")
            )
            continue
        seen.add(spec.id)
        out.tables.append(spec)
    return out


def load_declarations(path: Path | str | None = None) -> LoadedDeclarations:
    """Read and validate a declarations file; a missing file declares nothing."""
    p = Path(path) if path is not None else default_tables_yaml()
    if not p.exists():
        return LoadedDeclarations(source=str(p))
    return parse_declarations_text(p.read_text(), str(p))


@dataclass
class ApplyReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    catalogs_changed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.removed or self.catalogs_changed)

    def __str__(self) -> str:
        return (
            f"{len(self.created)} created, {len(self.updated)} updated, {len(self.unchanged)} unchanged, "
            f"{len(self.removed)} removed; catalogs changed: {len(self.catalogs_changed)}"
        )


def apply_declarations(store: Store, loaded: LoadedDeclarations, *, prune: bool = True) -> ApplyReport:
    """Upsert the file's catalogs and tables into the store (owned by code). Idempotent.

    With ``prune``, code-owned tables no longer in the file are soft-deleted — but only when the
    file loaded without errors, so a typo never unregisters a table.
    """
    report = ApplyReport()
    for catalog in loaded.catalogs:
        if store.catalogs.upsert(catalog, Owner.CODE):
            report.catalogs_changed.append(catalog.name)
    for table in loaded.tables:
        outcome = store.tables.upsert(table, Owner.CODE)
        getattr(report, outcome).append(table.id)
    if prune and not loaded.errors:
        report.removed = store.tables.prune_code_tables({t.id for t in loaded.tables})
    return report
