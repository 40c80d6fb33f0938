"""The registry's declarations side, for the DAG file: load every declarations file of a parse, from
its sync record when the file is unchanged (no YAML read), else from the YAML (reusing the validated
form of unchanged entries); and, for a task start, the one table it builds."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import TableNotFound, UnreadableTable
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.declarations.errors import DeclarationError
from airflow_tablemgmt.declarations.files import declaration_paths, read_declarations_text
from airflow_tablemgmt.declarations.model import FileSet, LoadedDeclarations, ParsedDocument, ReuseValidated
from airflow_tablemgmt.declarations.parse import begin_parse, finish_parse, validation_fingerprint
from airflow_tablemgmt.declarations.policies import check_policies_across_files
from airflow_tablemgmt.store.declaration_files import DeclarationFileRecord, DeclarationFileRepository

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)


def validation_context(external_catalogs: set[str]) -> str:
    return hashlib.sha256(
        (validation_fingerprint() + "\n" + ",".join(sorted(external_catalogs))).encode()
    ).hexdigest()


def load_files(
    tables_yaml: str | Path | None,
    store: Store,
    registered: dict[str, Any] | None,
    catalogs: dict[str, CatalogSpec],
    *,
    use_records: bool = True,
) -> FileSet:
    """Load ``tables.yaml`` and ``tables.d/*.yaml``.

    A file whose bytes and validation context match its record, and whose recorded rows are
    unchanged (``registered`` given), is taken from the store without reading its YAML. Other
    files are loaded with libyaml; an entry whose digest, context and row match the record reuses
    the stored spec, every other entry is validated.
    """
    # Here, not at the top: a table's task start (one_table) checks nothing across files, and these checks
    # bring the dynamic tables' models (its parse's imports count: issue 40's single-DAG parse).
    from airflow_tablemgmt.declarations.checks import check_across_files

    paths, path_errors = declaration_paths(tables_yaml)
    texts: dict[str, str | None] = {}
    files: list[LoadedDeclarations] = []
    for path in paths:
        text, out = read_declarations_text(path)
        texts[out.source] = text
        files.append(out)
    if path_errors:
        files[0].errors.extend(path_errors)
    records = DeclarationFileRepository.of(store).get_many([f.source for f in files]) if use_records else {}
    fs = FileSet(files, records)
    # Pass 1: each file's catalogs, from its record when the bytes are unchanged, else from YAML.
    docs: dict[str, ParsedDocument] = {}
    own_catalogs: dict[str, set[str]] = {}
    for f in files:
        rec = records.get(f.source)
        if texts[f.source] is None:
            own_catalogs[f.source] = set()
        elif rec is not None and rec.digest == f.digest and all(c in catalogs for c in rec.catalogs):
            own_catalogs[f.source] = set(rec.catalogs)
        else:
            docs[f.source] = begin_parse(texts[f.source] or "", f.source)
            own_catalogs[f.source] = {c.name for c in docs[f.source].out.catalogs}
    everywhere = set().union(*own_catalogs.values()) if own_catalogs else set()
    # Pass 2: tables.
    for i, f in enumerate(files):
        if texts[f.source] is None:
            continue
        context = fs.contexts[f.source] = validation_context(everywhere - own_catalogs[f.source])
        rec = records.get(f.source)
        if f.source not in docs and rec is not None:
            from_record = _from_record(f, rec, context, registered, catalogs)
            if from_record is not None:
                files[i] = from_record
                continue
            docs[f.source] = begin_parse(texts[f.source] or "", f.source)
        reuse = _reuse_from(rec, context, registered)
        files[i] = finish_parse(
            docs[f.source], known_catalogs=everywhere - own_catalogs[f.source], reuse=reuse
        )
        fs.parsed.add(f.source)
    check_across_files(files)
    check_policies_across_files(files)
    if any(f.dynamic_tables for f in files):
        _check_dynamic(store, fs)
    return fs


def _check_dynamic(store: Store, fs: FileSet) -> None:
    """Downstream tables need an upstream, no cycles: checked against the store's dynamic tables too."""
    from airflow_tablemgmt.declarations.checks import check_dynamic_tables

    try:
        fs.stored_dynamic = {dt.id: dt for dt in store.dynamic.list()}
    except Exception as e:  # noqa: BLE001 - the dynamic tables are left out, everything else loads
        fs.stored_dynamic = None
        log.warning("could not read the store's dynamic tables", exc_info=True)
        for f in fs.files:
            for d in f.dynamic_tables:
                f.errors.append(
                    DeclarationError(
                        f.source,
                        d.id,
                        f"{f.source}: dynamic table {d.id}: not synced, the store's dynamic tables "
                        f"cannot be read: {type(e).__name__}: {e}",
                    )
                )
            ids = {d.id for d in f.dynamic_tables}
            f.tables = [t for t in f.tables if t.id not in ids]
            f.dynamic_tables = []
            fs.unrecorded.add(f.source)
        return
    fs.unrecorded |= check_dynamic_tables(
        fs.files, {tid: dt.definition for tid, dt in fs.stored_dynamic.items()}
    )


def _from_record(
    f: LoadedDeclarations,
    rec: DeclarationFileRecord,
    context: str,
    registered: dict[str, Any] | None,
    catalogs: dict[str, CatalogSpec],
) -> LoadedDeclarations | None:
    """The file as its record says, when that is provably what the YAML would give; else None."""
    if rec.digest != f.digest or rec.context != context or registered is None:
        return None
    tables: list[TableSpec] = []
    for table_id, (_, updated) in rec.entries.items():
        row = registered.get(table_id)
        if row is None or row.managed_by != Owner.CODE or row.updated_at.isoformat() != updated:
            return None  # the row changed (or went) since this file wrote it
        tables.append(row.spec)
    return LoadedDeclarations(
        source=f.source,
        catalogs=[catalogs[c] for c in rec.catalogs],
        tables=tables,
        errors=[DeclarationError(f.source, t, m) for t, m in rec.errors],
        digest=f.digest,
        declares_tables=rec.declares_tables,
        entry_digests={tid: d for tid, (d, _) in rec.entries.items()},
        reused=len(tables),
    )


def _reuse_from(
    rec: DeclarationFileRecord | None, context: str, registered: dict[str, Any] | None
) -> ReuseValidated | None:
    if rec is None or rec.context != context or registered is None:
        return None

    def reuse(name: str, digest: str) -> TableSpec | None:
        entry = rec.entries.get(name)
        row = registered.get(name)
        if entry is None or row is None or entry[0] != digest:
            return None
        if row.managed_by != Owner.CODE or row.updated_at.isoformat() != entry[1]:
            return None
        return row.spec  # type: ignore[no-any-return]

    return reuse


def one_table(
    tables_yaml: str | Path | None, store: Store, table_id: str, catalogs: dict[str, CatalogSpec]
) -> tuple[list[str], TableSpec | None]:
    """The spec a starting task builds its DAG from: the store's row when every declarations file
    is in sync with its record (one row read, whatever the files' size); else, if a file changed
    since its last sync (an edit the dag-processor has not parsed yet), that file's declaration of
    the table — only the changed files are loaded, nothing is written — else the row."""
    errors: list[str] = []
    try:
        row = store.tables.get_registered(table_id)
    except TableNotFound:
        row = None
    except UnreadableTable as e:
        row = None
        errors.append(str(e))
    paths, path_errors = declaration_paths(tables_yaml)
    if path_errors:
        errors += [e.message for e in path_errors]
    records = DeclarationFileRepository.of(store).for_table([str(p) for p in paths], table_id)
    everywhere = {c for r in records.values() for c in r.catalogs}
    stale: list[tuple[str, LoadedDeclarations]] = []
    for path in paths:
        text, out = read_declarations_text(path)
        rec = records.get(out.source)
        if text is None:
            errors += [e.message for e in out.errors]
            continue  # missing or unreadable: declares nothing, its tables keep their rows
        if (
            rec is None
            or rec.digest != out.digest
            or rec.context != validation_context(everywhere - set(rec.catalogs))
        ):
            stale.append((text, out))
        elif table_id in rec.entries and (
            row is None
            or row.managed_by != Owner.CODE
            or row.updated_at.isoformat() != rec.entries[table_id][1]
        ):
            stale.append((text, out))
    if not stale:
        return errors, (row.spec if row is not None else None)
    docs = [begin_parse(text, out.source) for text, out in stale]
    known = set(catalogs) | {c.name for d in docs for c in d.out.catalogs}
    for doc in docs:
        loaded = finish_parse(doc, known_catalogs=known - {c.name for c in doc.out.catalogs})
        catalogs.update({c.name: c for c in loaded.catalogs})
        for spec in loaded.tables:
            if spec.id == table_id:
                return [], spec
        errors += [e.message for e in loaded.errors if e.table in (table_id, "<file>")]
    return errors, (row.spec if row is not None else None)
