"""The Spark Connect engine's exceptions."""

from __future__ import annotations

from airflow_tablemgmt.core.errors import TableMgmtError


class ConnectUnavailable(TableMgmtError):
    """The Spark Connect server refused the connection, could not be reached, or died during the job.
    The message names the server; Airflow's retry runs the job again."""


class ConnectBusy(ConnectUnavailable):
    """Every slot of the Spark Connect server (its slot limit) stayed held by other tasks for as long as
    the task waits for one. The message names the server and the limit; Airflow's retry tries again."""


class NotOnConnect(TableMgmtError):
    """An action that needs the Spark driver's JVM (py4j) and therefore runs only through spark-submit."""
