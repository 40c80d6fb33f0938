"""REST API ``/tablemgmt/v1`` (and the UI page's routes), thin over ``airflow_tablemgmt.services``."""

PREFIX = "/tablemgmt"
