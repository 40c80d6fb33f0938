"""Which version of each source an incremental refresh reads to compute the query's change (pure).

The query reads its sources in *occurrences* (a table joined with itself is two). Under appends, a query
made of filters, projections, ``UNION ALL`` and inner joins changes by a bag of new rows, computed by
reading each occurrence at one of three versions (:class:`Read`):

* ``CHANGE``: only the rows appended between the snapshot the last refresh read and the one this refresh
  read (Iceberg's incremental append read: ``start-snapshot-id`` exclusive, ``end-snapshot-id`` inclusive;
  ``replace`` snapshots such as compactions add nothing);
* ``AT``: the table at one snapshot (time travel by ``snapshot-id``);
* ``NONE``: no rows;
* ``INSERTED`` / ``DELETED``: for a source whose deletes or overwrites (copy-on-write) Iceberg's changelog
  reads (``SourceChange.removes``), the rows its changelog between the two snapshots marks inserted /
  deleted (a rewritten file's untouched rows come as both and cancel).

Without a join the query is linear in every occurrence, so one term gives the change: every occurrence of
a changed source read as ``CHANGE``, of an unchanged one as ``NONE``. With inner joins the query is
multilinear, and the change is the sum of one term per changed occurrence *i* (``A⋈B`` with both sides
changed: ``ΔA⋈B_old + A_new⋈ΔB``, which is ``A_new⋈B_new − A_old⋈B_old``): occurrence *i* as ``CHANGE``, the occurrences before it at this
refresh's snapshot, those after it at the last refresh's. ``UNION ALL`` beside a join is not multilinear in
that sense (``ΔA ∪ B`` is not a change), so such a query is refreshed in full, naming why.

With removals the change is a signed bag: ``Δ = Δ⁺ − Δ⁻``. Every term is linear in its changed occurrence(s),
so :func:`terms` gives the added rows (a changelog source read as ``INSERTED``) and :func:`removals` the
removed ones: the same terms with each changelog source's occurrence read as ``DELETED`` and the other
changed occurrences of a term without a join as ``NONE`` (an append adds no removed row); for a join, a term
whose changed occurrence only appended has no removed rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_tablemgmt.core.dynamic.source_changes import SourceChange

CHANGE, AT, NONE, INSERTED, DELETED = "CHANGE", "AT", "NONE", "INSERTED", "DELETED"
JOIN_WITH_UNION = (
    "its change cannot be computed term by term: it joins and unions (UNION ALL) its sources in one query"
)


@dataclass(frozen=True)
class Read:
    """How one occurrence of a source is read: ``CHANGE``, ``INSERTED`` or ``DELETED`` (``since`` exclusive
    to ``until`` inclusive), ``AT`` ``snapshot`` (None: the table has no snapshot, read as it is), or
    ``NONE``."""

    kind: str
    snapshot: int | None = None
    since: int | None = None
    until: int | None = None


def pinned(occurrences: Sequence[str], snapshots: Mapping[str, int | None]) -> list[Read]:
    """Every occurrence at the snapshot this refresh recorded for its table: what a FULL refresh reads, so
    that the next incremental refresh starts exactly where this one stopped."""
    return [Read(AT, snapshots.get(table)) for table in occurrences]


def _changed(change: SourceChange) -> Read:
    kind = INSERTED if change.removes else CHANGE
    return Read(kind, since=change.since, until=change.current)


def terms(
    occurrences: Sequence[str], changes: Mapping[str, SourceChange], *, joined: bool, unioned: bool
) -> list[list[Read]] | str:
    """The terms whose ``UNION ALL`` is the rows the query's change adds (each a :class:`Read` per
    occurrence, in the order the plan lists them), or why there are none to compute (a reason for FULL). No
    term when no source changed."""
    changed = [changes[t].changed if t in changes else False for t in occurrences]
    if not any(changed):
        return []
    if not joined:
        return [
            [_changed(changes[t]) if c else Read(NONE) for t, c in zip(occurrences, changed, strict=True)]
        ]
    if unioned:
        return JOIN_WITH_UNION
    out: list[list[Read]] = []
    for i in range(len(occurrences)):
        if not changed[i]:
            continue
        term: list[Read] = []
        for j, other in enumerate(occurrences):
            change = changes[other]
            if j == i:
                term.append(_changed(change))
            elif j < i or not changed[j]:
                term.append(Read(AT, change.current))
            else:
                term.append(Read(AT, change.since))
        out.append(term)
    return out


def removals(added: list[list[Read]]) -> list[list[Read]]:
    """The terms whose ``UNION ALL`` is the rows the query's change removes, from :func:`terms`' answer:
    each term with a changelog read (``INSERTED``), that read as ``DELETED`` and the appended reads
    (``CHANGE``) as ``NONE``; terms without one remove nothing. Empty when no source removed rows."""
    out: list[list[Read]] = []
    for term in added:
        if not any(r.kind == INSERTED for r in term):
            continue
        out.append(
            [
                Read(DELETED, since=r.since, until=r.until)
                if r.kind == INSERTED
                else Read(NONE)
                if r.kind == CHANGE
                else r
                for r in term
            ]
        )
    return out
