"""The lease watchdog fires once when no renewal succeeded for its deadline, never while renewals
keep coming, and never after it was stopped (issue 23, item 1). It touches no store."""

from __future__ import annotations

import time

from airflow_tablemgmt.lifecycle.watchdog import LeaseWatchdog


def test_it_fires_once_after_the_deadline_without_a_renewal() -> None:
    fired: list[float] = []
    dog = LeaseWatchdog(0.2, fired.append).start()
    assert dog.fired.wait(2)
    time.sleep(0.1)
    assert len(fired) == 1 and fired[0] >= 0.2


def test_renewals_keep_it_quiet_and_count_from_when_they_were_sent() -> None:
    fired: list[float] = []
    dog = LeaseWatchdog(0.3, fired.append).start()
    for _ in range(8):
        time.sleep(0.1)
        dog.renewed(time.monotonic())
    assert not fired
    dog.renewed(time.monotonic() - 10)  # an older send time never moves the deadline back
    assert dog.remaining() > 0.2
    dog.stop()
    time.sleep(0.5)
    assert not fired


def test_a_lease_taken_long_ago_fires_at_once() -> None:
    fired: list[float] = []
    dog = LeaseWatchdog(5.0, fired.append).start(renewed_at=time.monotonic() - 10)
    assert dog.fired.wait(2) and fired[0] >= 10
