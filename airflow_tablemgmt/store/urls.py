"""Store URLs: parsed with a message that shows what one looks like, printed without their password,
and the errors a driver or an unreachable server gives, in words that say what to do."""

from __future__ import annotations

import importlib.util
import re

from sqlalchemy import make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError, DBAPIError

from airflow_tablemgmt.store.errors import StoreUnavailable

# Which pip package provides a SQLAlchemy driver module, for the "driver not installed" message.
_DRIVER_PACKAGES = {
    "psycopg2": "psycopg2-binary",
    "psycopg": "psycopg[binary]",
    "pg8000": "pg8000",
    "asyncpg": "asyncpg",
    "mysqldb": "mysqlclient",
    "pymysql": "pymysql",
    "mysql": "mysql-connector-python",
    "mariadb": "mariadb",
}
_USERINFO = re.compile(r"(//[^/:@]*:)[^@/]*@")
EXAMPLE_URLS = "postgresql+psycopg2://user@host:5432/tablemgmt or sqlite:////absolute/path/tablemgmt.db"


def hide_password(url: str) -> str:
    """``url`` with the password of its user-info part replaced by ``***``, even when unparseable."""
    return _USERINFO.sub(r"\1***@", url)


def parse_store_url(url: str) -> URL:
    """``url`` as a SQLAlchemy URL, or :class:`StoreUnavailable` saying what a store URL looks like."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        raise StoreUnavailable(
            f"store URL {hide_password(str(url))!r} is not a database URL; expected e.g. {EXAMPLE_URLS}"
        ) from None
    if parsed.drivername == "postgresql" and not importable("psycopg") and importable("psycopg2"):
        # SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3; this package ships psycopg2.
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed


def importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def unreachable_message(url: URL, error: DBAPIError) -> str:
    """Why the server at ``url`` could not be reached: host:port (or the file) and the driver's reason."""
    if url.get_backend_name() == "sqlite":
        where = url.database or ":memory:"
    else:
        where = f"{url.host or 'localhost'}:{url.port or _default_port(url)}"
    reason = str(error.orig).strip().splitlines()[0] if str(error.orig).strip() else type(error.orig).__name__
    if url.password:
        reason = reason.replace(str(url.password), "***")
    return (
        f"cannot reach the store at {where} ({url.render_as_string(hide_password=True)}): {reason}. "
        "Check that the database is running and that --store-url / the tablemgmt_default connection "
        "points at it"
    )


def _default_port(url: URL) -> str:
    return {"postgresql": "5432", "mysql": "3306", "mssql": "1433", "oracle": "1521"}.get(
        url.get_backend_name(), "?"
    )


def driver_error(url: URL, error: ImportError) -> StoreUnavailable:
    module = (getattr(error, "name", None) or "").split(".")[0].lower()
    backend, driver = url.get_backend_name(), url.get_driver_name()
    package = _DRIVER_PACKAGES.get(module) or _DRIVER_PACKAGES.get(driver) or module or driver
    hint = f"pip install {package}"
    if backend == "mysql" and package == "mysqlclient":
        hint += " (or use mysql+pymysql:// and pip install pymysql)"
    if backend == "postgresql" and package != "psycopg2-binary":
        hint += " (or use postgresql+psycopg2://, whose driver ships with this package)"
    return StoreUnavailable(
        f"the store URL {url.render_as_string(hide_password=True)} needs the {driver} driver for {backend}, "
        f"which is not installed: {hint}"
    )
