"""The ``tablemgmt://`` asset URIs: their shape, and the normalizer Airflow applies to every one of them.

Declared in provider info (``asset-uris``), so Airflow calls :func:`sanitize_uri` whenever an
``Asset(uri="tablemgmt://...")`` is made, ours or a user's hand-written DAG's.
"""
