"""The ``suspended`` notification comes from the run's typed outcome (``TableOutcome.halted``, carried by
the operator's :class:`TableHaltedFailure`), never from the failure's message text."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_tablemgmt.core.factory import TableOutcome
from airflow_tablemgmt.core.notify import NotifySpec
from airflow_tablemgmt.core.outcomes import TableHalted
from airflow_tablemgmt.notifications.callback import decide
from airflow_tablemgmt.operators.maintenance import TableHaltedFailure

TABLE = "lake.agg.daily"
NOTIFIER = {
    "class": "airflow.providers.smtp.notifications.smtp.SmtpNotifier",
    "kwargs": {"to": "a@example.com"},
}


def _store() -> Any:
    """No processes; the dynamic table SUSPENDED after 5 failures (what the factory recorded)."""
    dynamic = SimpleNamespace(
        state="SUSPENDED", suspended_reason="5 consecutive failed refreshes", consecutive_failures=5
    )
    return SimpleNamespace(
        processes=SimpleNamespace(list=lambda **_: []),
        dynamic=SimpleNamespace(find=lambda table_id: dynamic if table_id == TABLE else None),
    )


def _events(exception: BaseException) -> list[str]:
    spec = NotifySpec.model_validate({"notifiers": [NOTIFIER], "events": ["failed", "suspended"]})
    decided = decide(_store(), TABLE, "refresh", table_notify=None, global_spec=spec, exception=exception)
    return sorted(str(n.event) for _, n in decided)


def test_the_typed_outcome_announces_the_suspension_whatever_the_message_says() -> None:
    outcome = TableOutcome(state="SUSPENDED", halted=f"{TABLE} stopped taking scheduled refreshes")
    error = TableHaltedFailure("tablemgmt: refresh failed; the table stopped", outcome)
    assert isinstance(error, AirflowFailException)  # still fails the task without retries
    assert _events(error) == ["failed", "suspended"]


def test_a_message_that_says_suspended_is_not_an_outcome() -> None:
    error = RuntimeError(
        f"tablemgmt: refresh failed; {TABLE} is now suspended: 5 consecutive failed refreshes"
    )
    assert _events(error) == ["failed"]


def test_an_outcome_that_halted_nothing_announces_nothing() -> None:
    error = TableHaltedFailure("tablemgmt: refresh failed", TableOutcome(state="ACTIVE", halted=None))
    assert _events(error) == ["failed"]


def test_the_failure_keeps_its_outcome_through_pickling() -> None:
    outcome = TableOutcome(
        state="SUSPENDED", halted=f"{TABLE} is now suspended: 5 consecutive failed refreshes"
    )
    error = pickle.loads(pickle.dumps(TableHaltedFailure("tablemgmt: refresh failed", outcome)))
    assert (
        isinstance(error, TableHalted)
        and error.outcome == outcome
        and str(error) == "tablemgmt: refresh failed"
    )
