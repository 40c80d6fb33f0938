"""Airflow settings read without importing Airflow, for the few decisions that can be made that way.

Importing Airflow costs seconds (its configuration, logging and task runner come with it). A process
that has not imported it, the ``tablemgmt`` CLI, only needs to know whether some settings are set at
all: a secrets backend (which Airflow asks before the environment), a metrics exporter (without one,
Airflow's Stats are a no-op). Read where Airflow reads them: ``AIRFLOW__<SECTION>__<KEY>`` (and its
``_CMD`` / ``_SECRET`` forms), then the config file (``$AIRFLOW_CONFIG``, else
``$AIRFLOW_HOME/airflow.cfg``, else ``~/airflow/airflow.cfg``). Whatever cannot be read plainly (a
command, a secret, an unreadable file) is reported as :data:`UNKNOWN`, and the caller then asks Airflow.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

from airflow_tablemgmt.spark.launch.artifacts import ArtifactSettings
from airflow_tablemgmt.spark.launch.environment import parse_allow_list

UNKNOWN = "<unknown>"
_FALSE = frozenset({"", "false", "f", "0", "no", "off"})


#: The parsed config file by (path, mtime, size): a task asks for some thirty settings, and parsing the file
#: each time was a tenth of a forked Connect task's own work; a changed file is read again.
_PARSED: dict[str, tuple[tuple[int, int], configparser.ConfigParser]] = {}


def _config_file() -> configparser.ConfigParser | None:
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    path = Path(os.environ.get("AIRFLOW_CONFIG") or os.path.join(home, "airflow.cfg")).expanduser()
    try:
        st = path.stat()
    except FileNotFoundError:
        return configparser.ConfigParser(interpolation=None, strict=False)
    except OSError:
        return None
    key = (st.st_mtime_ns, st.st_size)
    cached = _PARSED.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError):
        return None
    _PARSED[str(path)] = (key, parser)
    return parser


def setting(section: str, key: str) -> str | None:
    """The setting's value as Airflow would read it, None when it is not set, :data:`UNKNOWN` when only
    Airflow can tell (a ``_cmd`` / ``_secret`` form, an unreadable config file)."""
    env = f"AIRFLOW__{section.upper()}__{key.upper()}"
    if env in os.environ:
        return os.environ[env]
    if os.environ.get(env + "_CMD") or os.environ.get(env + "_SECRET"):
        return UNKNOWN
    parser = _config_file()
    if parser is None:
        return UNKNOWN
    if not parser.has_section(section):
        return None
    if parser.get(section, key + "_cmd", fallback="") or parser.get(section, key + "_secret", fallback=""):
        return UNKNOWN
    return parser.get(section, key, fallback=None)


def may_be_set(section: str, key: str) -> bool:
    """Whether the setting may hold a value (an empty one counts as unset)."""
    value = setting(section, key)
    return value is not None and value.strip() != ""


def may_be_true(section: str, key: str) -> bool:
    """Whether the boolean setting may be true (unset means its default, false)."""
    value = setting(section, key)
    return value is not None and value.strip().lower() not in _FALSE


def secrets_backend_may_be_configured() -> bool:
    """A secrets backend for servers (``[secrets] backend``) or workers (``[workers] secrets_backend``)."""
    return may_be_set("secrets", "backend") or may_be_set("workers", "secrets_backend")


def metrics_may_be_on() -> bool:
    """Whether Airflow's Stats may export anything: StatsD, DogStatsD or OpenTelemetry switched on."""
    return any(may_be_true("metrics", k) for k in ("statsd_on", "statsd_datadog_enabled", "otel_on"))


def setting_or_airflow(section: str, key: str) -> str | None:
    """The setting's value; Airflow's configuration is asked only when it cannot be read plainly."""
    value = setting(section, key)
    if value != UNKNOWN:
        return value
    from airflow.configuration import conf

    return conf.get(section, key, fallback=None)


def jvm_class_cache_settings() -> tuple[bool, str | None]:
    """``[tablemgmt] jvm_class_cache`` (default true) and ``[tablemgmt] jvm_class_cache_dir`` (None: the
    default directory)."""
    enabled = setting_or_airflow("tablemgmt", "jvm_class_cache")
    directory = setting_or_airflow("tablemgmt", "jvm_class_cache_dir")
    on = enabled is None or not enabled.strip() or enabled.strip().lower() not in _FALSE
    return on, (directory.strip() or None) if directory else None


def artifact_settings() -> ArtifactSettings:
    """``[tablemgmt] jars_dir`` (default: the user's cache directory), ``maven_repository`` (default Maven
    Central) and ``jars_offline`` (default false)."""
    directory = (setting_or_airflow("tablemgmt", "jars_dir") or "").strip()
    repository = (setting_or_airflow("tablemgmt", "maven_repository") or "").strip()
    offline = (setting_or_airflow("tablemgmt", "jars_offline") or "").strip().lower()
    defaults = ArtifactSettings()
    return ArtifactSettings(
        directory=Path(directory).expanduser() if directory else defaults.directory,
        repository=repository or defaults.repository,
        offline=offline not in _FALSE,
    )


def job_env_allow() -> tuple[str, ...]:
    """``[tablemgmt] job_env_allow``: environment variables a Spark job may inherit beyond the built-in
    allow-list (``spark/launch/environment.py``)."""
    return parse_allow_list(setting_or_airflow("tablemgmt", "job_env_allow"))


#: ``[database] sql_alchemy_connect_args`` for an Airflow metadata DB on SQLite (the demo's ``make ui``):
#: a writer waits up to 60 s for SQLite's lock instead of failing at once with "database is locked" (the
#: driver's default is 5 s), so a burst of REST calls beside the scheduler's own writes queues instead of
#: killing a component. Set it as ``airflow_tablemgmt.hooks.airflow_settings.SQLITE_METADATA_CONNECT_ARGS``.
SQLITE_METADATA_CONNECT_ARGS: dict[str, object] = {"timeout": 60}
