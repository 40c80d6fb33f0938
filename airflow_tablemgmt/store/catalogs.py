"""``CatalogRepository``: the registered Iceberg catalogs (``tms_catalog``)."""

from __future__ import annotations

import builtins
import logging
from typing import Any, cast

from sqlalchemy import Engine, Row, Table, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.core.errors import CatalogNotFound, TableMgmtError
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.store.clock import utcnow
from airflow_tablemgmt.store.errors import CatalogManagedByCode
from airflow_tablemgmt.store.models import CatalogRow

log = logging.getLogger(__name__)

_T = cast(Table, CatalogRow.__table__)
_RETRIES = 5


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
        values: dict[str, Any] = {
            "type": str(spec.type),
            "warehouse": spec.warehouse,
            "properties": dict(spec.properties),
        }
        for _ in range(_RETRIES):
            with self._engine.begin() as conn:
                row = conn.execute(select(_T).where(_T.c.name == spec.name)).first()
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
        with self._engine.connect() as conn:
            row = conn.execute(select(_T).where(_T.c.name == name)).first()
            if row is None:
                names = conn.execute(select(_T.c.name).order_by(_T.c.name)).scalars().all()
                raise CatalogNotFound(
                    f"catalog {name!r} is not registered; registered catalogs: {', '.join(names) or 'none'}"
                )
        return _to_spec(row)

    def list(self) -> builtins.list[CatalogSpec]:
        """Every catalog, sorted by name."""
        with self._engine.connect() as conn:
            rows = conn.execute(select(_T).order_by(_T.c.name)).all()
        return [_to_spec(r) for r in rows]


def _to_spec(row: Row[Any]) -> CatalogSpec:
    return CatalogSpec.model_validate(
        {"name": row.name, "type": row.type, "warehouse": row.warehouse, "properties": row.properties or {}}
    )
