"""Sensors: wait for table state (a new Iceberg snapshot)."""
