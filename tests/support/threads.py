"""Running a call in a thread and keeping its outcome, for tests that race workers against each other."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Start ``fn`` in a daemon thread; the returned list receives its result or the exception it raised."""
    out: list[Any] = []

    def call() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 - the test asserts on it
            out.append(e)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    return t, out
