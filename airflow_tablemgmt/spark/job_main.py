"""Kept for one release for old paths: the job's entry point is now ``spark/job/main.py``.

A submission built by an older worker may still name this file to spark-submit; run as a script it
runs the new main. Imported, it re-exports the new module's names (``run``, ``main`` ...).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a file, Python puts this directory first on sys.path, where conf.py, errors.py ... would
    # shadow top-level modules of the same name. The package is installed; import it absolutely.
    if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    from airflow_tablemgmt.spark.job.main import main

    sys.exit(main())

from airflow_tablemgmt.spark.job.main import *  # noqa: E402, F403
from airflow_tablemgmt.spark.job.main import catalog_of, load_spec, main, run, table_of  # noqa: E402, F401
