"""Pytest plugins shared by every test directory, registered in ``tests/conftest.py``'s
``pytest_plugins`` (fixtures are found by name: no test imports them)."""
