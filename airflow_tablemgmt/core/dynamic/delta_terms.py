"""Which version of each source an incremental refresh reads to compute the query's change (pure).

The query reads its sources in *occurrences* (a table joined with itself is two). Under appends, a query
made of filters, projections, ``UNION ALL`` and inner joins changes by a bag of new rows, computed by
reading each occurrence at one of three versions (:class:`Read`):

* ``CHANGE``: only the rows appended between the snapshot the last refresh read and the one this refresh
  read (Iceberg's incremental append read: ``start-snapshot-id`` exclusive, ``end-snapshot-id`` inclusive;
  ``replace`` snapshots such as compactions add nothing);
* ``AT``: the table at one snapshot (time travel by ``snapshot-id``);
* ``NONE``: no rows.

Without a join the query is linear in every occurrence, so one term gives the change: every occurrence of
a changed source read as ``CHANGE``, of an unchanged one as ``NONE``. With inner joins the query is
multilinear, and the change is the sum of one term per changed occurrence *i* (``A⋈B`` with both sides
changed: ``ΔA⋈B_old + A_new⋈ΔB``, which is ``A_new⋈B_new − A_old⋈B_old``): occurrence *i* as ``CHANGE``, the occurrences before it at this
refresh's snapshot, those after it at the last refresh's. ``UNION ALL`` beside a join is not multilinear in
that sense (``ΔA ∪ B`` is not a change), so such a query is refreshed in full, naming why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_tablemgmt.core.dynamic.source_changes import APPENDS, SourceChange

CHANGE, AT, NONE = "CHANGE", "AT", "NONE"
JOIN_WITH_UNION = (
    "its change cannot be computed term by term: it joins and unions (UNION ALL) its sources in one query"
)


@dataclass(frozen=True)
class Read:
    """How one occurrence of a source is read: ``CHANGE`` (``since`` exclusive to ``until`` inclusive),
    ``AT`` ``snapshot`` (None: the table has no snapshot, read as it is), or ``NONE``."""

    kind: str
    snapshot: int | None = None
    since: int | None = None
    until: int | None = None


def pinned(occurrences: Sequence[str], snapshots: Mapping[str, int | None]) -> list[Read]:
    """Every occurrence at the snapshot this refresh recorded for its table: what a FULL refresh reads, so
    that the next incremental refresh starts exactly where this one stopped."""
    return [Read(AT, snapshots.get(table)) for table in occurrences]


def terms(
    occurrences: Sequence[str], changes: Mapping[str, SourceChange], *, joined: bool, unioned: bool
) -> list[list[Read]] | str:
    """The terms whose ``UNION ALL`` is the query's change (each a :class:`Read` per occurrence, in the
    order the plan lists them), or why there are none to compute (a reason for FULL). No term when no
    source appended."""
    changed = [changes[t].kind == APPENDS if t in changes else False for t in occurrences]
    if not any(changed):
        return []
    if not joined:
        return [
            [
                Read(CHANGE, since=changes[t].since, until=changes[t].current) if c else Read(NONE)
                for t, c in zip(occurrences, changed, strict=True)
            ]
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
                term.append(Read(CHANGE, since=change.since, until=change.current))
            elif j < i or not changed[j]:
                term.append(Read(AT, change.current))
            else:
                term.append(Read(AT, change.since))
        out.append(term)
    return out
