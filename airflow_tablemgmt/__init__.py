"""airflow-tablemgmt: scheduled, stateful, observable maintenance of lakehouse tables."""

__version__ = "0.1.0"
