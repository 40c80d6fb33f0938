"""The environment a Spark job starts with: an allow-list, never the caller's whole environment.

A job runs user code (a dynamic table's query, a catalog's classes), and the process that submits it
— an Airflow worker, the CLI — holds secrets in its environment (``AIRFLOW__API_AUTH__JWT_SECRET``, the
Fernet key, database URLs, ``TABLEMGMT_STORE_URL``). spark-submit gets only what Spark, Java, Hadoop and
Python need to start and find their configuration, plus what ``[tablemgmt] job_env_allow`` adds (names,
or prefixes ending in ``*``: e.g. ``AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY`` for a worker whose S3
credentials are in its environment).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "HOSTNAME",
        "JAVA_HOME",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",
        "VIRTUAL_ENV",
        "LD_LIBRARY_PATH",
        "KRB5_CONFIG",
        "KRB5CCNAME",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        # Where AWS/GCP/Azure SDKs find configuration files and regions, never the secrets themselves.
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "GOOGLE_APPLICATION_CREDENTIALS",
    }
)
# HUDI_CONF_DIR: where Hudi reads hudi-defaults.conf (e.g. the lock provider a table's writers share).
ALLOWED_PREFIXES = ("SPARK_", "PYSPARK_", "HADOOP_", "YARN_", "HIVE_CONF_DIR", "HUDI_CONF_DIR", "LC_")


def parse_allow_list(value: str | None) -> tuple[str, ...]:
    """``[tablemgmt] job_env_allow``: comma- or space-separated names, ``PREFIX*`` for a prefix."""
    return tuple(p for p in (value or "").replace(",", " ").split() if p)


def allowed(name: str, extra: Iterable[str] = ()) -> bool:
    if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES):
        return True
    for pattern in extra:
        if pattern.endswith("*") and name.startswith(pattern[:-1]) or name == pattern:
            return True
    return False


def job_environment(
    overrides: Mapping[str, str], extra_allowed: Iterable[str] = (), source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allowed part of ``source`` (default: this process's environment), then ``overrides``."""
    source = os.environ if source is None else source
    extra = tuple(extra_allowed)
    env = {k: v for k, v in source.items() if allowed(k, extra)}
    env.update(overrides)
    return env
