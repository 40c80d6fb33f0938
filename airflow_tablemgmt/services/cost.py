"""Cost per run, rolled up: ``tablemgmt cost``, ``GET /cost`` and the page read :func:`cost_rollup`.

Each process records what its Spark job cost (``core/cost.py``: executor core-seconds, CPU seconds, bytes
read and written) beside the files and bytes it removed; the store sums them per UTC day, table, action
and status as processes finish (``store/process_cost.py``). A rollup groups those sums by any of
``day``, ``policy`` (the policy managing the table, ``tms_table.policy``), ``table``, ``action`` and
``status`` over the last ``days`` days, for the whole fleet or one table or policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.store import process_cost
from airflow_tablemgmt.store.process_cost import DIMENSIONS, CostRow

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

MAX_DAYS = 366
MAX_GROUPS = 10_000


def parse_by(value: str | Sequence[str] | None, field: str = "--by") -> list[str]:
    """``table``, ``policy,day`` ... as a list of :data:`DIMENSIONS`, in their order (default: by table)."""
    if value is None or value == "" or value == []:
        return ["table"]
    parts = value.split(",") if isinstance(value, str) else [p for v in value for p in str(v).split(",")]
    names = [p.strip() for p in parts if p.strip()]
    unknown = [n for n in names if n not in DIMENSIONS]
    if unknown or not names:
        raise InvalidInput(
            f"{field}: {', '.join(unknown) or repr(value)} is not a way to group costs; "
            f"allowed: any of {', '.join(DIMENSIONS)}, comma-separated"
        )
    return [d for d in DIMENSIONS if d in names]  # the rollup's order, whatever the order asked


def cost_rollup(
    store: Store,
    by: str | Sequence[str] | None = None,
    *,
    days: int = 30,
    table: str | None = None,
    policy: str | None = None,
    action: str | None = None,
    limit: int = 1000,
    now: datetime | None = None,
) -> list[CostRow]:
    """The cost of the processes that finished in the last ``days`` UTC days (today included), grouped
    by ``by``; newest day first, then the most core-seconds."""
    dims = parse_by(by)
    if not 1 <= days <= MAX_DAYS:
        raise InvalidInput(f"--days: {days} is out of range; allowed: 1 to {MAX_DAYS}")
    if not 1 <= limit <= MAX_GROUPS:
        raise InvalidInput(f"--limit: {limit} is out of range; allowed: 1 to {MAX_GROUPS}")
    today = (now or datetime.now(UTC)).astimezone(UTC)
    since = process_cost.as_of(today - timedelta(days=days - 1))
    return process_cost.rollup(
        store.engine,
        dims,
        since_day=since,
        until_day=process_cost.as_of(today),
        table=table,
        policy=policy,
        actions=[action] if action else (),
        limit=limit,
    )
