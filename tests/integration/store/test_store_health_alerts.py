"""``tms_health_alert`` (migration 0005): the state the ``unhealthy`` notification flips, on SQLite and a
real PostgreSQL. Exactly one of several workers recording the same crossing at once is told it crossed."""

from __future__ import annotations

from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.health_alerts import HealthAlertRepository

TABLE = "lake.sales.orders"


def test_only_a_change_of_side_is_a_crossing(store: Store) -> None:
    alerts = HealthAlertRepository.of(store)
    assert alerts.get(TABLE, 50) is None
    assert [alerts.record(TABLE, 50, s) for s in (80, 49, 30, 50, 90, 10)] == [
        False,  # first measurement, healthy: nothing to say
        True,  # crossed below
        False,  # still below
        True,  # recovered (50 is not below 50)
        False,  # still recovered
        True,  # below again
    ]
    state = alerts.get(TABLE, 50)
    assert state is not None and state.below and state.score == 10
    assert state.measured_at >= state.changed_at


def test_a_first_measurement_below_is_a_crossing_and_thresholds_are_independent(store: Store) -> None:
    alerts = HealthAlertRepository.of(store)
    assert alerts.record(TABLE, 50, 40) is True
    assert alerts.record(TABLE, 30, 40) is False  # not below 30
    assert alerts.record(TABLE, 30, 20) is True
    assert alerts.record(TABLE, 50, 20) is False  # still below 50
    assert alerts.record("lake.sales.other", 50, 20) is True


def test_racing_workers_send_once(backend, race) -> None:
    stores = [backend.store() for _ in range(6)]
    HealthAlertRepository.of(stores[0]).record(TABLE, 50, 90)
    results = race(6, lambda i: HealthAlertRepository.of(stores[i]).record(TABLE, 50, 20))
    assert sorted(results, key=str) == [False] * 5 + [True], results
    # and racing on a table nobody measured yet: one INSERT wins, the others find it below already
    results = race(6, lambda i: HealthAlertRepository.of(stores[i]).record("lake.sales.fresh", 50, 20))
    assert sorted(results, key=str) == [False] * 5 + [True], results
