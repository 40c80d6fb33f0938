"""``DeclarationFileRepository``: what the last sync of each declarations file wrote (``tms_declaration_file``).

A DAG-file parse reads these rows to learn, without loading any YAML, whether the store already
holds exactly what a file declares (same bytes, same validation context): then the file's tables
are the store's rows, and a task start reads one table row.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Engine, Table, delete, insert, select

from airflow_tablemgmt.store.clock import utcnow
from airflow_tablemgmt.store.models import DeclarationFileRow

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store

_T = cast(Table, DeclarationFileRow.__table__)


@dataclass(frozen=True)
class DeclarationFileRecord:
    """One file as synced: its digest and context, and per table ``(entry hash, row updated_at)``."""

    source: str
    digest: str
    context: str
    declares_tables: bool
    catalogs: list[str] = field(default_factory=list)
    entries: dict[str, tuple[str, str]] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)


class DeclarationFileRepository:
    """Rows of ``tms_declaration_file`` by source path. Get it with :meth:`of`, which makes the
    store's schema ready first."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def of(cls, store: Store) -> DeclarationFileRepository:
        """The repository of ``store``, its schema brought up to date first (as the store's own
        repository properties do)."""
        store._ensure_schema()
        return cls(store.engine)

    def get_many(self, sources: Collection[str]) -> dict[str, DeclarationFileRecord]:
        if not sources:
            return {}
        with self._engine.connect() as conn:
            rows = conn.execute(select(_T).where(_T.c.source.in_(list(sources)))).all()
        return {r.source: _to_record(r) for r in rows}

    def for_table(self, sources: Collection[str], table_id: str) -> dict[str, DeclarationFileRecord]:
        """The files' records with only ``table_id``'s entry, extracted by the database (a record
        lists every table of its file: decoding 10,000 entries was most of a task start's registry
        read). ``errors`` are left out."""
        if not sources:
            return {}
        query = select(
            _T.c.source,
            _T.c.digest,
            _T.c.context,
            _T.c.declares_tables,
            _T.c.catalogs,
            _T.c.entries[table_id].label("entry"),
        ).where(_T.c.source.in_(list(sources)))
        with self._engine.connect() as conn:
            rows = conn.execute(query).all()
        return {
            r.source: DeclarationFileRecord(
                source=r.source,
                digest=r.digest,
                context=r.context,
                declares_tables=bool(r.declares_tables),
                catalogs=list(r.catalogs or []),
                entries={table_id: (str(r.entry[0]), str(r.entry[1]))} if r.entry else {},
            )
            for r in rows
        }

    def all(self) -> dict[str, DeclarationFileRecord]:
        with self._engine.connect() as conn:
            rows = conn.execute(select(_T)).all()
        return {r.source: _to_record(r) for r in rows}

    def put(self, record: DeclarationFileRecord) -> None:
        """Replace the row of ``record.source`` (delete + insert in one transaction: portable)."""
        values: dict[str, Any] = {
            "source": record.source,
            "digest": record.digest,
            "context": record.context,
            "declares_tables": record.declares_tables,
            "catalogs": list(record.catalogs),
            "entries": {k: list(v) for k, v in record.entries.items()},
            "errors": [list(e) for e in record.errors],
            "updated_at": utcnow(),
        }
        with self._engine.begin() as conn:
            conn.execute(delete(_T).where(_T.c.source == record.source))
            conn.execute(insert(_T).values(**values))

    def forget(self, sources: Collection[str]) -> None:
        """Drop rows, so the next parse loads those files in full."""
        if not sources:
            return
        with self._engine.begin() as conn:
            conn.execute(delete(_T).where(_T.c.source.in_(list(sources))))


def _to_record(row: Any) -> DeclarationFileRecord:
    entries: Mapping[str, Any] = row.entries or {}
    return DeclarationFileRecord(
        source=row.source,
        digest=row.digest,
        context=row.context,
        declares_tables=bool(row.declares_tables),
        catalogs=list(row.catalogs or []),
        entries={k: (str(v[0]), str(v[1])) for k, v in entries.items()},
        errors=[(str(t), str(m)) for t, m in (row.errors or [])],
    )
