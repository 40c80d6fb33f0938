"""Table leases: one holder at a time, expiry, takeover, renew, release."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.integration

TABLE = "lake.sales.orders"
T0 = datetime(2025, 3, 1, 3, 0, tzinfo=UTC)
TTL = timedelta(minutes=10)


def test_acquire_contend_reacquire(store):
    assert store.leases.get(TABLE) is None
    assert store.leases.acquire(TABLE, "worker-a", TTL, now=T0) is True
    assert store.leases.acquire(TABLE, "worker-b", TTL, now=T0 + timedelta(minutes=5)) is False

    # The holder re-acquiring extends its lease and keeps when it first got it.
    assert store.leases.acquire(TABLE, "worker-a", TTL, now=T0 + timedelta(minutes=5)) is True
    lease = store.leases.get(TABLE)
    assert lease is not None
    assert (lease.holder, lease.acquired_at, lease.expires_at) == ("worker-a", T0, T0 + timedelta(minutes=15))
    assert lease.acquired_at.tzinfo is UTC and lease.expires_at.tzinfo is UTC


def test_expired_lease_is_taken_over(store):
    store.leases.acquire(TABLE, "dead-worker", TTL, now=T0)
    assert store.leases.acquire(TABLE, "worker-b", TTL, now=T0 + TTL - timedelta(seconds=1)) is False
    later = T0 + TTL + timedelta(seconds=1)
    assert store.leases.get(TABLE).expired(later)
    assert store.leases.acquire(TABLE, "worker-b", TTL, now=later) is True
    lease = store.leases.get(TABLE)
    assert (lease.holder, lease.acquired_at) == ("worker-b", later)
    # The dead worker cannot renew or release what is no longer its lease.
    assert store.leases.renew(TABLE, "dead-worker", TTL, now=later) is False
    assert store.leases.release(TABLE, "dead-worker") is False
    assert store.leases.get(TABLE).holder == "worker-b"


def test_renew_extends_only_the_holders_lease(store):
    store.leases.acquire(TABLE, "worker-a", TTL, now=T0)
    assert store.leases.renew(TABLE, "worker-a", TTL, now=T0 + timedelta(minutes=8)) is True
    assert store.leases.get(TABLE).expires_at == T0 + timedelta(minutes=18)
    assert store.leases.renew(TABLE, "worker-b", TTL) is False
    assert store.leases.renew("lake.sales.unleased", "worker-a", TTL) is False


def test_release_frees_the_table(store):
    store.leases.acquire(TABLE, "worker-a", TTL)
    assert store.leases.release(TABLE, "worker-b") is False
    assert store.leases.release(TABLE, "worker-a") is True
    assert store.leases.get(TABLE) is None
    assert store.leases.release(TABLE, "worker-a") is False
    assert store.leases.acquire(TABLE, "worker-b", TTL) is True


def test_ttl_must_be_positive(store):
    with pytest.raises(ValueError, match="ttl: must be positive"):
        store.leases.acquire(TABLE, "worker-a", timedelta(0))


def test_racing_acquirers_get_one_holder(backend, race):
    stores = [backend.store() for _ in range(8)]
    stores[0].leases.get(TABLE)  # schema first, so the race is about the lease
    results = race(8, lambda i: stores[i].leases.acquire(TABLE, f"worker-{i}", TTL))
    assert sorted(results) == [False] * 7 + [True], results
    winner = results.index(True)
    assert stores[0].leases.get(TABLE).holder == f"worker-{winner}"


def test_racing_takeovers_of_an_expired_lease_get_one_holder(backend, race):
    stores = [backend.store() for _ in range(8)]
    stores[0].leases.acquire(TABLE, "dead-worker", TTL, now=T0)
    later = T0 + 2 * TTL
    results = race(8, lambda i: stores[i].leases.acquire(TABLE, f"worker-{i}", TTL, now=later))
    assert sorted(results) == [False] * 7 + [True], results
