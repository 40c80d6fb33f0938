"""``CatalogRepository``: the registered Iceberg catalogs (``tms_catalog``)."""

from __future__ import annotations

import builtins
import logging
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import ValidationError
from sqlalchemy import Engine, Row, Table, delete, exists, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.core.errors import (
    CatalogLocationTaken,
    CatalogNotFound,
    InvalidDeclaration,
    TableMgmtError,
    UnreadableCatalog,
)
from airflow_tablemgmt.core.tables import WRITING, CatalogSpec, CatalogType, Owner, format_validation_error
from airflow_tablemgmt.store.clock import utcnow
from airflow_tablemgmt.store.errors import CatalogInUse, CatalogManagedByCode
from airflow_tablemgmt.store.models import CatalogRow, TableRow

log = logging.getLogger(__name__)

_T = cast(Table, CatalogRow.__table__)
_TABLES = cast(Table, TableRow.__table__)
_RETRIES = 5


@dataclass(frozen=True)
class UnreadableCatalogRow:
    """A stored catalog that no longer validates, skipped by :meth:`CatalogRepository.list`. Its raw
    fields are kept so the catalog can still be shown (secrets masked) with what must be fixed."""

    name: str
    message: str
    type: str = ""
    warehouse: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)


class CatalogRepository:
    """Catalogs by name. Ownership works as for tables: code-owned rows refuse store writers."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def upsert(self, spec: CatalogSpec, owner: Owner) -> bool:
        """Create or update ``spec``; True if a row was created or changed.

        A catalog declared in dags/tables.yaml (owner CODE) refuses a STORE writer with
        :class:`CatalogManagedByCode`; a CODE writer takes over a store-owned catalog, since the
        file is re-applied on every parse and must win deterministically.
        """
        owner = Owner(owner)
        spec = _validated(spec)
        values: dict[str, Any] = {
            "type": str(spec.type),
            "warehouse": spec.warehouse,
            "properties": dict(spec.properties),
        }
        for _ in range(_RETRIES):
            with self._engine.begin() as conn:
                rows = conn.execute(select(_T)).all()
            row = next((r for r in rows if r.name == spec.name), None)
            _check_location(spec, [r for r in rows if r.name != spec.name])
            if row is None:
                now = utcnow()
                try:
                    with self._engine.begin() as conn:
                        conn.execute(
                            insert(_T).values(
                                name=spec.name, owner=str(owner), created_at=now, updated_at=now, **values
                            )
                        )
                    return True
                except IntegrityError:
                    continue  # created concurrently: compare against that row
            if row.owner == Owner.CODE and owner == Owner.STORE:
                raise CatalogManagedByCode(spec.name)
            if row.owner == owner and all(getattr(row, k) == v for k, v in values.items()):
                return False
            if row.owner != owner:
                log.warning("catalog %s: dags/tables.yaml takes it over from the store", spec.name)
            with self._engine.begin() as conn:
                changed = conn.execute(
                    update(_T)
                    .where(_T.c.name == spec.name, _T.c.owner == row.owner, _T.c.updated_at == row.updated_at)
                    .values(owner=str(owner), updated_at=utcnow(), **values)
                ).rowcount
            if changed == 1:
                return True
        raise TableMgmtError(f"catalog {spec.name}: gave up after {_RETRIES} concurrent modifications")

    def get(self, name: str) -> CatalogSpec:
        """The catalog; :class:`CatalogNotFound` if absent, :class:`UnreadableCatalog` if its row
        no longer validates."""
        with self._engine.connect() as conn:
            row = conn.execute(select(_T).where(_T.c.name == name)).first()
            if row is None:
                names = conn.execute(select(_T.c.name).order_by(_T.c.name)).scalars().all()
                raise CatalogNotFound(
                    f"catalog {name!r} is not registered; registered catalogs: {', '.join(names) or 'none'}"
                )
        return _to_spec(row)

    def delete(self, name: str, owner: Owner) -> None:
        """Remove the catalog. :class:`CatalogInUse` while a live table (a dynamic one included) is in
        it — checked by the DELETE itself, so a table registered meanwhile keeps its catalog;
        :class:`CatalogManagedByCode` for a store writer on a catalog of dags/tables.yaml."""
        self.get(name)  # CatalogNotFound naming the registered ones
        in_catalog = (_TABLES.c.catalog == name) & _TABLES.c.deleted_at.is_(None)
        with self._engine.begin() as conn:
            row = conn.execute(select(_T.c.owner).where(_T.c.name == name)).first()
            if row is not None and row.owner == Owner.CODE and Owner(owner) == Owner.STORE:
                raise CatalogManagedByCode(name)
            removed = conn.execute(
                delete(_T).where(_T.c.name == name, ~exists(select(_TABLES.c.id).where(in_catalog)))
            ).rowcount
            if removed == 0:
                using = conn.execute(
                    select(_TABLES.c.table_id).where(in_catalog).order_by(_TABLES.c.table_id)
                )
                raise CatalogInUse(name, [str(t) for t in using.scalars().all()])

    def list(self) -> builtins.list[CatalogSpec]:
        """Every catalog that loads, sorted by name; one that no longer validates is skipped
        (and logged), never fatal to the others: see :meth:`list_with_errors`."""
        specs, errors = self.list_with_errors()
        for err in errors:
            log.warning("%s", err.message)
        return specs

    def list_with_errors(self) -> tuple[builtins.list[CatalogSpec], builtins.list[UnreadableCatalogRow]]:
        with self._engine.connect() as conn:
            rows = conn.execute(select(_T).order_by(_T.c.name)).all()
        specs: builtins.list[CatalogSpec] = []
        errors: builtins.list[UnreadableCatalogRow] = []
        for r in rows:
            try:
                specs.append(_to_spec(r))
            except UnreadableCatalog as e:
                props = r.properties if isinstance(r.properties, dict) else {}
                errors.append(UnreadableCatalogRow(e.name, str(e), str(r.type), r.warehouse, dict(props)))
        return specs, errors


def _validated(spec: CatalogSpec) -> CatalogSpec:
    """Validated again from its serialized form (a spec may have skipped validation): nothing
    invalid, and no plaintext secret, is ever written."""
    try:
        return CatalogSpec.model_validate(spec.model_dump(mode="json"), context=WRITING)
    except ValidationError as e:
        raise InvalidDeclaration(format_validation_error(e, f"catalog {spec.name}")) from None


def _check_location(spec: CatalogSpec, others: builtins.list[Row[Any]]) -> None:
    """Refuse a second catalog over the tables another catalog reaches (same warehouse, or same
    service and warehouse): one physical table would get two names and two leases."""
    key = spec.location_key()
    for other in others:
        try:
            # Only the location fields matter, and an old row may not pass today's validation.
            other_key = CatalogSpec.model_construct(
                name=other.name,
                type=CatalogType(other.type),
                warehouse=other.warehouse,
                properties=dict(other.properties or {}),
            ).location_key()
        except ValueError:
            continue
        if other_key == key:
            where = spec.warehouse or spec.properties.get("uri")
            raise CatalogLocationTaken(
                spec.name,
                other.name,
                f"catalog {spec.name}: {spec.type.value} {where!r} reaches the same tables as catalog "
                f"{other.name} ({other.type} {other.warehouse or (other.properties or {}).get('uri')!r}); "
                f"one physical table would have two names and two leases; use catalog {other.name}",
            )


def _to_spec(row: Row[Any]) -> CatalogSpec:
    try:
        return CatalogSpec.model_validate(
            {
                "name": row.name,
                "type": row.type,
                "warehouse": row.warehouse,
                "properties": row.properties or {},
            }
        )
    except ValidationError as e:
        why = format_validation_error(e).replace("\n", "; ")
        raise UnreadableCatalog(
            row.name,
            f"catalog {row.name}: its stored declaration no longer validates (written by an older version?): "
            f"{why}; set it again or remove it",
        ) from None
