"""The test PostgreSQL (started by scripts/services.sh): its URL and an admin engine that fails the
run under CI when the server is unreachable, and skips locally."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

PG_URL = os.environ.get("TABLEMGMT_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")


def reachable_admin(suite: str) -> Engine:
    """An admin engine on the test PostgreSQL, checked reachable: under CI an unreachable server fails
    the test, locally it skips it. The caller disposes of the engine."""
    engine = create_engine(PG_URL, poolclass=NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as e:
        message = f"PostgreSQL for {suite} is unreachable at {PG_URL}: {e.orig}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return engine


def admin_engine(suite: str) -> Iterator[Engine]:
    """For a session fixture: ``yield from admin_engine("the store suite")``."""
    engine = reachable_admin(suite)
    yield engine
    engine.dispose()
