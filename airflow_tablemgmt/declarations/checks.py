"""Checks that need the whole set of files (and the store's dynamic tables), not one entry: each
catalog and table declared once across the files, and dynamic tables' upstreams and cycles. A
failing entry becomes an error of its file and is left out; the others load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic import DynamicTableSpec, downstream_problem, find_cycle
from airflow_tablemgmt.declarations.errors import DeclarationError
from airflow_tablemgmt.declarations.model import LoadedDeclarations

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store


def check_across_files(files: list[LoadedDeclarations]) -> None:
    """Catalogs and tables must be declared once across the set: a later file's repeat is an
    error of that file (so it does not prune), naming the file that declared it first."""
    catalog_at: dict[str, str] = {}
    table_at: dict[str, str] = {}
    for f in files:
        kept_catalogs = []
        for c in f.catalogs:
            if c.name in catalog_at:
                f.errors.append(
                    DeclarationError(
                        f.source,
                        f"catalog {c.name}",
                        f"{f.source}: catalogs.{c.name}: declared twice, also in {catalog_at[c.name]}; "
                        f"declare each catalog in one file",
                    )
                )
                continue
            catalog_at[c.name] = f.source
            kept_catalogs.append(c)
        f.catalogs = kept_catalogs
        kept = []
        for t in f.tables:
            if t.id in table_at:
                f.errors.append(
                    DeclarationError(
                        f.source,
                        t.id,
                        f"{f.source}: table {t.id}: declared twice, also in {table_at[t.id]}; "
                        f"declare each table in one file",
                    )
                )
                continue
            table_at[t.id] = f.source
            kept.append(t)
        f.tables = kept
        kept_ids = {t.id for t in kept}
        f.dynamic_tables = [d for d in f.dynamic_tables if d.id in kept_ids]


def with_stored_analysis(declared: DynamicTableSpec, stored: DynamicTableSpec | None) -> DynamicTableSpec:
    """``declared`` (from YAML) with what creation recorded on the stored definition: its schema, and
    its source tables while the query is unchanged. A YAML entry never carries these (Spark fills them
    at creation), so without this every parse would look like a change and wipe them."""
    if stored is None:
        return declared
    update: dict[str, Any] = {}
    if declared.columns is None and stored.columns is not None:
        update["columns"] = stored.columns
    if declared.source_tables is None and stored.source_tables is not None and stored.query == declared.query:
        update["source_tables"] = stored.source_tables
    return declared.model_copy(update=update) if update else declared


def check_dynamic_tables(
    files: list[LoadedDeclarations], stored: Mapping[str, DynamicTableSpec] | None = None
) -> set[str]:
    """Checks that need every dynamic table (the files' and the store's other ones): a ``freshness:
    downstream`` table needs an upstream dynamic table, and dynamic tables must not read each other
    in a cycle. A failing entry becomes an error of its file (and is left out); the others load.

    Also merges each declared definition with what its creation recorded (:func:`with_stored_analysis`),
    so its maintenance view is the one the store holds. Returns the sources it found errors in
    (their errors depend on the rest of the set, not only on their own bytes).
    """
    stored = dict(stored or {})
    declared: dict[str, tuple[LoadedDeclarations, DynamicTableSpec]] = {}
    for f in files:
        merged = [with_stored_analysis(d, stored.get(d.id)) for d in f.dynamic_tables]
        if any(m is not d for m, d in zip(merged, f.dynamic_tables, strict=True)):
            views = {m.id: m.table_spec() for m in merged}
            f.tables = [views.get(t.id, t) for t in f.tables]
            f.dynamic_tables = merged
        declared.update({d.id: (f, d) for d in f.dynamic_tables})
    if not declared:
        return set()
    definitions = {
        **{k: v for k, v in stored.items() if k not in declared},
        **{k: d for k, (_, d) in declared.items()},
    }
    # Entries with errors still name dynamic tables: their downstream tables are not blamed for them.
    known = set(definitions) | {n for f in files for n in f.dynamic_names}
    edges = {tid: d.upstream_candidates(known) for tid, d in definitions.items()}
    bad: dict[str, str] = {}
    for tid, (_, d) in declared.items():
        problem = downstream_problem(d, edges[tid])
        if problem is not None:
            bad[tid] = problem + f"; dynamic tables: {', '.join(sorted(known - {tid})) or 'none'}"
    remaining = {k: {u for u in v if u in definitions} for k, v in edges.items()}
    while (cycle := find_cycle(remaining)) is not None:
        members = set(cycle)
        for tid in members & set(declared):
            bad.setdefault(
                tid, f"query: dynamic tables would read each other in a cycle: {' -> '.join(cycle)}"
            )
        for tid in members:
            remaining.pop(tid, None)
        remaining = {k: v - members for k, v in remaining.items()}
    for tid, message in sorted(bad.items()):
        f, d = declared[tid]
        f.tables = [t for t in f.tables if t.id != tid]
        f.dynamic_tables = [x for x in f.dynamic_tables if x.id != tid]
        f.entry_digests.pop(tid, None)
        f.errors.append(DeclarationError(f.source, tid, f"{f.source}: dynamic table {tid}: {message}"))
    return {declared[tid][0].source for tid in bad}


def stored_dynamic_definitions(store: Store) -> dict[str, DynamicTableSpec]:
    """The store's dynamic tables' definitions by id (live ones)."""
    return {dt.id: dt.definition for dt in store.dynamic.list()}


def is_cross_file(e: DeclarationError) -> bool:
    return "declared twice, also in " in e.message
