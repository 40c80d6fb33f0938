"""Alembic environment for the tablemgmt store.

Migrations run only through :meth:`airflow_tablemgmt.store.Store.upgrade`, which builds the
Alembic config in code and hands over an open connection in ``config.attributes["connection"]``
(already inside the transaction that serializes concurrent upgrades). There is no alembic.ini.
"""

from __future__ import annotations

from alembic import context

from airflow_tablemgmt.store.models import VERSION_TABLE, Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "tablemgmt migrations run through airflow_tablemgmt.store.Store(url).upgrade(); "
        "the alembic command line and offline (--sql) mode are not supported"
    )

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    # SQLite cannot ALTER most things; batch mode lets later migrations copy-and-move tables.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
