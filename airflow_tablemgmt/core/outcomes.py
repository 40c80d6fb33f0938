"""A failed run's typed outcome for its table, as an exception: :class:`TableHalted`.

The operator raises it (as ``operators.maintenance.TableHaltedFailure``, which Airflow also sees as a
failure without retries) when a store-aware factory reported that the run's failure halted the table
(:class:`~airflow_tablemgmt.core.factory.TableOutcome` ``halted``: a dynamic table suspended after its
failures). The failure callback reads the outcome it carries, never the message's text."""

from __future__ import annotations

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.factory import TableOutcome


class TableHalted(TableMgmtError):
    """A run failed and its outcome stopped the table taking scheduled work; ``outcome`` says how."""

    def __init__(self, message: str, outcome: TableOutcome) -> None:
        super().__init__(message)
        self.outcome = outcome

    def __reduce__(self) -> tuple[type[TableHalted], tuple[str, TableOutcome]]:
        return (type(self), (str(self), self.outcome))
