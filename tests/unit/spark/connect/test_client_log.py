"""pyspark's Connect client log in a task: Airflow's logging set-up enables the logger pyspark disabled at
import, so each gRPC call was logged at INFO, twice; ``import_client`` keeps it at warnings unless pyspark's
own ``SPARK_CONNECT_LOG_LEVEL`` or a deployment's logging configuration says otherwise. Each case runs in a
fresh interpreter (a logger's level is the process's)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import logging, sys
import pyspark.sql.connect.client.core as core   # as warm.py imports it, before Airflow's logging set-up
from airflow.sdk.log import configure_logging
configure_logging()
if sys.argv[1] == "chosen":
    logging.getLogger("pyspark.sql.connect.client.core").setLevel(logging.DEBUG)
from airflow_tablemgmt.spark.connect.client import import_client
import_client()
log = logging.getLogger("pyspark.sql.connect.client.core")
print(log.disabled, log.isEnabledFor(logging.INFO), log.isEnabledFor(logging.WARNING))
"""


def _probe(case: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_LOG_LEVEL"} | env
    done = subprocess.run(
        [sys.executable, "-c", PROBE, case], env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("case", "env", "expected"),
    [
        # Airflow's set-up enabled it at INFO; the client's import brings it back to warnings
        ("default", {}, "False False True"),
        # pyspark's own switch: its level, untouched
        ("default", {"SPARK_CONNECT_LOG_LEVEL": "info"}, "False True True"),
        # a level the deployment's logging configuration set: untouched
        ("chosen", {}, "False True True"),
    ],
)
def test_the_connect_client_logs_warnings_only_unless_asked(case: str, env: dict, expected: str) -> None:
    assert _probe(case, **env) == expected
