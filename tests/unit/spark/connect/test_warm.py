"""``spark/connect/warm.py``, what a deployment's ``airflow_local_settings.py`` imports ahead of its tasks:
in a fresh interpreter, its import leaves every module it lists imported, and the factory module of every
installed format (the plugins' too, found through the registry's entry points, not named in the module)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import airflow_tablemgmt.spark.connect.warm as warm
from airflow_tablemgmt.core.formats import FORMATS
factories = sorted(f.factory.partition(":")[0] for f in FORMATS.all())
print(json.dumps({
    "missing": [m for m in warm.MODULES if m not in sys.modules],
    "factories": factories,
    "unimported": [m for m in factories if m not in sys.modules],
    "channels": [m for m in sys.modules if m == "pyspark.sql.connect.client.core"],
}))
"""


def test_warm_imports_its_modules_and_every_formats_factory() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["missing"] == []
    # this package's three formats and the Paimon plugin the test environment installs
    expected = {"airflow_tablemgmt.formats.iceberg.factory", "tablemgmt_paimon.factory"}
    assert expected <= set(found["factories"])
    assert found["unimported"] == []
    assert found["channels"] == ["pyspark.sql.connect.client.core"]
