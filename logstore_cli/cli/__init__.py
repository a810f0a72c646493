"""Typer command-line interface: parse arguments, call a service, render through ``Output``."""
