"""Catalog operations: list, set (explicit create-or-change) and the create-only path of `register`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from airflow_tablemgmt.core.errors import CatalogNotFound
from airflow_tablemgmt.core.secrets import check_secret_properties, masked
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, parse_catalog
from airflow_tablemgmt.core.uri_credentials import redact_uri, redact_uris
from airflow_tablemgmt.services.errors import CatalogConflict, InvalidInput

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

CatalogOutcome = Literal["created", "updated", "unchanged"]
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class CatalogResult:
    name: str
    outcome: CatalogOutcome


@dataclass(frozen=True)
class CatalogView:
    """A catalog as listed: secret property values masked. ``problem``: why its stored row no longer
    validates (a plaintext secret written before secrets had to be references...) and what to fix."""

    name: str
    type: str
    warehouse: str | None
    properties: dict[str, Any]
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "type": self.type,
            "warehouse": self.warehouse,
            "properties": self.properties,
        }
        if self.problem is not None:
            out["problem"] = self.problem
        return out


def check_warehouse(spec: CatalogSpec, field: str = "warehouse") -> None:
    """A relative warehouse would resolve against whatever directory each worker runs in."""
    w = spec.warehouse
    if w is not None and not (w.startswith("/") or _URI.match(w)):
        raise InvalidInput(
            f"{field}: must be an absolute path or a URI such as s3://bucket/warehouse or "
            f"file:///data/warehouse, got {w!r}"
        )


def build_catalog(
    name: str,
    *,
    type: str | None = None,
    warehouse: str | None = None,
    properties: Mapping[str, str] | None = None,
    source: str = "catalog",
) -> CatalogSpec:
    """A validated ``CatalogSpec``: the same rules as YAML, plus an absolute warehouse and secrets by
    reference only."""
    props = dict(properties or {})
    try:
        check_secret_properties(props)
    except ValueError as e:
        raise InvalidInput(f"{source}: {e}") from None
    spec = parse_catalog(
        {"name": name, "type": type or "hadoop", "warehouse": warehouse, "properties": props}, source
    )
    check_warehouse(spec)
    return spec


def find_catalog(store: Store, name: str) -> CatalogSpec | None:
    try:
        return store.catalogs.get(name)
    except CatalogNotFound:
        return None


def updated_catalog(
    store: Store,
    name: str,
    *,
    type: str | None = None,
    warehouse: str | None = None,
    properties: Mapping[str, str] | None = None,
    source: str = "catalog",
) -> CatalogSpec:
    """The catalog ``name`` with the given fields changed and the others kept (PATCH semantics: a
    ``PUT`` without ``properties`` must not wipe them); a new catalog when none exists."""
    existing = find_catalog(store, name)
    if existing is not None:
        type = type if type is not None else existing.type.value
        warehouse = warehouse if warehouse is not None else existing.warehouse
        properties = properties if properties is not None else existing.properties
    return build_catalog(name, type=type, warehouse=warehouse, properties=properties, source=source)


def set_catalog(store: Store, spec: CatalogSpec) -> CatalogResult:
    """Create or change a store-owned catalog; a catalog declared in tables.yaml refuses."""
    check_warehouse(spec)
    existed = find_catalog(store, spec.name) is not None
    changed = store.catalogs.upsert(spec, Owner.STORE)
    return CatalogResult(spec.name, "unchanged" if not changed else ("updated" if existed else "created"))


def catalog_view(spec: CatalogSpec) -> CatalogView:
    """``spec`` as shown to users: secret properties masked, credentials inside URIs (rows written before
    they were refused) redacted."""
    return CatalogView(
        spec.name, str(spec.type), redact_uri(spec.warehouse), redact_uris(masked(spec.properties))
    )


def list_catalogs(store: Store) -> list[CatalogView]:
    """Every catalog, sorted by name. A row that no longer validates is listed too — masked like the
    others, with its ``problem`` — rather than hidden: a legacy row holding a plaintext secret must be
    seen to be migrated to a reference."""
    specs, unreadable = store.catalogs.list_with_errors()
    views = [catalog_view(c) for c in specs]
    for row in unreadable:
        views.append(
            CatalogView(
                row.name,
                row.type,
                redact_uri(row.warehouse),
                redact_uris(masked(row.properties)),
                problem=f"needs migration: {row.message}",
            )
        )
    return sorted(views, key=lambda v: v.name)


def remove_catalog(store: Store, name: str) -> None:
    """Remove a store-owned catalog no table uses (``CatalogInUse`` names them; a catalog declared in
    tables.yaml is removed from the file)."""
    store.catalogs.delete(name, Owner.STORE)


def ensure_catalog(store: Store, wanted: CatalogSpec, *, type_given: bool, warehouse_given: bool) -> bool:
    """Create ``wanted`` if missing (True); if it exists, it must already match what was given.

    Registering a table never changes a catalog: a different warehouse would silently re-point every
    table in it.
    """
    check_warehouse(wanted)
    current = find_catalog(store, wanted.name)
    if current is None:
        store.catalogs.upsert(wanted, Owner.STORE)
        return True
    differs = (type_given and current.type != wanted.type) or (
        warehouse_given and (current.warehouse or "").rstrip("/") != (wanted.warehouse or "").rstrip("/")
    )
    if differs:
        fix = f"tablemgmt catalog set {wanted.name} --type {wanted.type}"
        if wanted.warehouse:
            fix += f" --warehouse {wanted.warehouse}"
        raise CatalogConflict(
            f"catalog {wanted.name} already exists with type {current.type}, warehouse "
            f"{current.warehouse or '(none)'}; registering a table never changes a catalog (every table in "
            f"it would move). To change the catalog: `{fix} [--property KEY=VALUE ...]`, or register "
            "without --catalog-type/--warehouse"
        )
    return False
