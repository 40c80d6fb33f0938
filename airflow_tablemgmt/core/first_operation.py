"""A job's first operation on its engine, told to whoever runs the job and waits for that moment.

A planned batch runs its jobs one after another on one thread (``services/batch_overlap.py``), and a table
whose job ended holds its own bookkeeping back until the next job is under way, so that the two do not
contend for the worker's cores while the next job prepares. "Under way" is when the next job sends its first
operation to the engine, which only the engine sees: the batch installs a callback for the job it runs
(:func:`watching`, in the thread that runs it) and an engine that can tell (the Spark Connect engine, before
each operation it sends) calls :func:`sent`. An engine that says it does (:data:`SIGNALS`, an attribute of its
submitter) is waited for; one that does not is not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: The submitter attribute that says its engine calls :func:`sent` before its first operation.
SIGNALS = "signals_first_operation"

_CALLBACK: ContextVar[Callable[[], None] | None] = ContextVar("tablemgmt_first_operation", default=None)


@contextmanager
def watching(callback: Callable[[], None]) -> Iterator[None]:
    """Run the block with ``callback`` called (once) when the job it runs sends its first operation."""
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            callback()

    token = _CALLBACK.set(once)
    try:
        yield
    finally:
        _CALLBACK.reset(token)


def sent() -> None:
    """The job running in this thread is about to send an operation to its engine."""
    callback = _CALLBACK.get()
    if callback is not None:
        callback()
