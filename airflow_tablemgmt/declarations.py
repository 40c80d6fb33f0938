"""Table declarations kept as code: ``dags/tables.yaml`` -> validated specs -> the store.

Each table is validated on its own, so one bad entry is reported by name (file, table, field path,
value, what is allowed) while the others still load; reading never raises. Tables declared here are
owned by code: REST and the CLI refuse to change them.

Pruning (removing code-owned tables the file no longer lists) is the one destructive step, so it
needs positive evidence: a file that parsed without any error and lists ``tables:`` with at least
one entry. A missing, empty, ``{}``/``null``, undecodable or unreadable file never prunes; an
explicit ``tables: []`` prunes only with ``allow_empty_prune`` (``tablemgmt apply --prune``).
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
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec, format_validation_error, short_repr

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
    # True only when the file parsed as a mapping with an explicit ``tables:`` list (even empty).
    # A missing, empty, ``{}``/``null`` or unreadable file declares nothing, so it never prunes.
    declares_tables: bool = False

    def raise_for_errors(self) -> None:
        if self.errors:
            raise InvalidDeclaration("\n".join(e.message for e in self.errors))

    def may_prune(self, *, allow_empty_prune: bool = False) -> bool:
        """Whether code-owned tables missing from this file may be removed from the store.

        Only a file that parsed without any error and declares ``tables:`` explicitly; an
        explicit ``tables: []`` (which would remove every code-owned table) only when asked.
        """
        if self.errors or not self.declares_tables:
            return False
        return bool(self.tables) or allow_empty_prune


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
    return short_repr(raw)


def parse_declarations_text(text: str, source: str) -> LoadedDeclarations:
    """Validate a declarations document. Never raises: every problem is a :class:`DeclarationError`
    of its entry (the others still load) or of the file."""
    out = LoadedDeclarations(
        source=source, digest=hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    )
    try:
        _parse_into(out, text)
    except Exception as e:  # noqa: BLE001 - a last line of defence: the DAG file must keep its other DAGs
        out.errors.append(_file_error(source, f"cannot be read: {type(e).__name__}: {_short(e)}"))
    return out


def _file_error(source: str, message: str) -> DeclarationError:
    return DeclarationError(source, "<file>", f"{source}: {message}")


def _short(e: BaseException, limit: int = 500) -> str:
    text = str(e)
    return text if len(text) <= limit else text[:limit] + "..."


def _parse_into(out: LoadedDeclarations, text: str) -> None:
    source = out.source
    try:
        data = yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - YAMLError, but also ValueError for a 5,000-digit int
        out.errors.append(_file_error(source, f"not valid YAML: {_short(e)}"))
        return
    if data is None:
        return  # an empty file (or only comments): declares nothing
    if not isinstance(data, dict):
        out.errors.append(
            _file_error(source, f"expected a mapping with 'catalogs' and 'tables', got {type(data).__name__}")
        )
        return
    unknown = [k for k in data if k not in ("version", "catalogs", "tables")]
    if unknown:
        shown = sorted(short_repr(k) if not isinstance(k, str) else k for k in unknown)
        out.errors.append(
            _file_error(source, f"unknown top-level keys {shown}; allowed: version, catalogs, tables")
        )
    if data.get("version", 1) != 1 or isinstance(data.get("version"), bool):
        out.errors.append(_file_error(source, f"version: must be 1, got {short_repr(data.get('version'))}"))
    _parse_catalogs(out, data.get("catalogs"))
    raw_tables = data.get("tables")
    if raw_tables is None:
        return  # no `tables:` (or `tables:` with nothing under it): declares no tables
    if not isinstance(raw_tables, list):
        out.errors.append(
            _file_error(source, f"tables: expected a list of tables, got {type(raw_tables).__name__}")
        )
        return
    out.declares_tables = True
    _parse_tables(out, raw_tables)


def _parse_catalogs(out: LoadedDeclarations, raw_catalogs: Any) -> None:
    source = out.source
    entries: list[tuple[str, Any]]
    if raw_catalogs is None:
        return
    if isinstance(raw_catalogs, dict):  # mapping form: {name: {type, warehouse}}
        entries = []
        for name, body in raw_catalogs.items():
            path = f"catalogs.{name}"
            if body is None:
                body = {}
            entries.append((path, {"name": name, **body} if isinstance(body, dict) else body))
    elif isinstance(raw_catalogs, list):
        entries = [(f"catalogs[{i}]", raw) for i, raw in enumerate(raw_catalogs)]
    else:
        out.errors.append(
            _file_error(source, f"catalogs: expected a list of catalogs, got {type(raw_catalogs).__name__}")
        )
        return
    by_location: dict[tuple[str, ...], str] = {}
    for path, raw in entries:
        label = f"catalog {raw.get('name')}" if isinstance(raw, dict) else f"catalog {path}"
        try:
            spec = CatalogSpec.model_validate(raw)
        except ValidationError as e:
            out.errors.append(
                DeclarationError(source, label, format_validation_error(e, source, path_prefix=path))
            )
            continue
        except Exception as e:  # noqa: BLE001 - one bad entry is that entry's error
            out.errors.append(
                DeclarationError(source, label, f"{source}: {path}: {type(e).__name__}: {_short(e)}")
            )
            continue
        if any(c.name == spec.name for c in out.catalogs):
            out.errors.append(DeclarationError(source, label, f"{source}: {path} ({label}): declared twice"))
            continue
        key = spec.location_key()
        if key in by_location:
            out.errors.append(
                DeclarationError(
                    source,
                    label,
                    f"{source}: {path} ({label}): reaches the same tables as catalog {by_location[key]} "
                    f"({spec.type.value}, {spec.warehouse or spec.properties.get('uri')}); one physical table "
                    f"would have two names and two leases; use catalog {by_location[key]}",
                )
            )
            continue
        by_location[key] = spec.name
        out.catalogs.append(spec)


def _parse_tables(out: LoadedDeclarations, raw_tables: list[Any]) -> None:
    source = out.source
    catalog_names = {c.name for c in out.catalogs}
    broken_catalogs = {e.table.removeprefix("catalog ") for e in out.errors if e.table.startswith("catalog ")}
    seen: set[str] = set()
    for i, raw in enumerate(raw_tables):
        name = _name_of(raw)
        try:
            spec = TableSpec.model_validate(raw)
        except ValidationError as e:
            msg = format_validation_error(e, source, path_prefix=f"tables[{i}]", label=f"table {name}")
            out.errors.append(DeclarationError(source, name, msg))
            continue
        except Exception as e:  # noqa: BLE001 - one bad entry is that entry's error
            msg = f"{source}: tables[{i}] (table {name}): {type(e).__name__}: {_short(e)}"
            out.errors.append(DeclarationError(source, name, msg))
            continue
        if spec.catalog not in catalog_names:
            out.errors.append(
                DeclarationError(
                    source,
                    name,
                    f"{source}: tables[{i}].catalog (table {name}): {spec.catalog!r} is not declared"
                    f"{' (its declaration has errors)' if spec.catalog in broken_catalogs else ''}; "
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


def load_declarations(path: Path | str | None = None) -> LoadedDeclarations:
    """Read and validate a declarations file. Never raises.

    A missing file declares nothing (no error: store-only deployments have none). A directory, a
    broken symlink, a file the OS refuses to open or one that is not UTF-8 is an error of the file.
    None of these declares tables, so none of them prunes.
    """
    p = Path(path) if path is not None else default_tables_yaml()
    source = str(p)
    out = LoadedDeclarations(source=source)
    try:
        os.stat(p)
    except FileNotFoundError:
        if os.path.lexists(p):
            out.errors.append(_file_error(source, f"is a broken symlink (to {os.readlink(p)!r})"))
        return out
    except OSError as e:
        out.errors.append(_file_error(source, f"cannot be read: {e.strerror or e}"))
        return out
    if p.is_dir():
        out.errors.append(_file_error(source, "is a directory, not a file"))
        return out
    try:
        raw = p.read_bytes()
    except OSError as e:
        out.errors.append(_file_error(source, f"cannot be read: {e.strerror or e}"))
        return out
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        out.errors.append(
            _file_error(
                source, f"is not UTF-8 (byte {raw[e.start]:#04x} at offset {e.start}); save it as UTF-8"
            )
        )
        return out
    return parse_declarations_text(text, source)


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


def apply_declarations(
    store: Store, loaded: LoadedDeclarations, *, prune: bool = True, allow_empty_prune: bool = False
) -> ApplyReport:
    """Upsert the file's catalogs and tables into the store (owned by code). Idempotent.

    With ``prune``, code-owned tables no longer in the file are soft-deleted — but only when the
    file loaded without errors and declares ``tables:`` with at least one entry, so a typo, an
    empty or a missing file never unregisters a table. An explicit ``tables: []`` prunes every
    code-owned table only with ``allow_empty_prune`` (``tablemgmt apply --prune``).
    """
    report = ApplyReport()
    for catalog in loaded.catalogs:
        if store.catalogs.upsert(catalog, Owner.CODE):
            report.catalogs_changed.append(catalog.name)
    for table in loaded.tables:
        outcome = store.tables.upsert(table, Owner.CODE)
        getattr(report, outcome).append(table.id)
    if prune and loaded.may_prune(allow_empty_prune=allow_empty_prune):
        report.removed = store.tables.prune_code_tables({t.id for t in loaded.tables})
    return report
