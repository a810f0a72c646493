"""JVM dependencies: poms kept in the package, resolved from Maven Central with ``mvn``."""
