"""PySpark jobs (ingest, read, verify) and the Spark session set-up. The only package importing pyspark."""
