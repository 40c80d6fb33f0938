"""Notifications through Airflow's notifiers (``BaseNotifier``: SMTP, Slack, any class by path).

What is sent when is decided here, from the store, when a maintenance or refresh task fails for good
(its ``on_failure_callback``, which Airflow calls after the last retry): ``failed``, ``failing-streak``
and ``suspended`` (:mod:`airflow_tablemgmt.core.notify`). Configured per table (``notify:``) and for
every table (``[tablemgmt] notify``); see docs/notifications.md.
"""
