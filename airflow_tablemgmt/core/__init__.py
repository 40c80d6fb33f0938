"""The vocabulary of table management. Imports no framework (Airflow, Spark, SQLAlchemy, FastAPI)."""
