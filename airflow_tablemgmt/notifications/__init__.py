"""Notifications through Airflow's notifiers (``BaseNotifier``: SMTP, Slack, any class by path).

What is sent when is decided here, from the store, on the worker: when a maintenance or refresh task fails
for good (its ``on_failure_callback``, which Airflow calls after the last retry): ``failed``,
``failing-streak`` and ``suspended``; and after each process of a table, when its health score crossed below
``health-below``: ``unhealthy``, once per crossing (:mod:`airflow_tablemgmt.notifications.health`). See
:mod:`airflow_tablemgmt.core.notify`. Configured per table (``notify:``) and for every table
(``[tablemgmt] notify``); see docs/notifications.md.
"""
