"""Apache Pulsar as a second log system (issue 23): a local standalone for development and tests."""
