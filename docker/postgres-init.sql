-- The tablemgmt store's database beside Airflow's (POSTGRES_DB=airflow): same server, separate schema
-- history, so Airflow's and tablemgmt's migrations never meet.
CREATE DATABASE tablemgmt;
