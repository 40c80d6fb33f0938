"""The job's environment is an allow-list: what Spark, Java, Hadoop, Hive and Hudi need to find their
configuration reaches spark-submit; the worker's secrets do not."""

from __future__ import annotations

from airflow_tablemgmt.spark.launch.environment import job_environment, parse_allow_list

WORKER = {
    "PATH": "/usr/bin",
    "JAVA_HOME": "/usr/lib/jvm/java-17",
    "HADOOP_CONF_DIR": "/etc/hadoop/conf",
    "HIVE_CONF_DIR": "/etc/hive/conf",
    "HUDI_CONF_DIR": "/etc/hudi/writers",  # hudi-defaults.conf: the lock provider the table's writers share
    "AIRFLOW__API_AUTH__JWT_SECRET": "canary-jwt",
    "AIRFLOW__CORE__FERNET_KEY": "canary-fernet",
    "TABLEMGMT_STORE_URL": "postgresql://u:canary@h/db",
    "AWS_SECRET_ACCESS_KEY": "canary-aws",
}


def test_configuration_directories_pass_and_secrets_stay() -> None:
    env = job_environment({"PYSPARK_PYTHON": "/venv/bin/python"}, source=WORKER)
    assert env["HUDI_CONF_DIR"] == "/etc/hudi/writers" and env["HIVE_CONF_DIR"] == "/etc/hive/conf"
    assert env["HADOOP_CONF_DIR"] == "/etc/hadoop/conf" and env["PYSPARK_PYTHON"] == "/venv/bin/python"
    assert not [v for v in env.values() if "canary" in v]


def test_job_env_allow_adds_names_and_prefixes() -> None:
    extra = parse_allow_list("AWS_SECRET_ACCESS_KEY, TABLEMGMT_*")
    env = job_environment({}, extra, source=WORKER)
    assert env["AWS_SECRET_ACCESS_KEY"] == "canary-aws" and "TABLEMGMT_STORE_URL" in env
    assert "AIRFLOW__CORE__FERNET_KEY" not in env
