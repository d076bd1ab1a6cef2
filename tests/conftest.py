"""Hypothesis profiles: ``dev`` (default) and ``ci`` (deterministic; loaded when CI=true).

The ``ci`` profile follows numpy's conftest: derandomized, no example database, no deadline (CI
machines are slow and uneven), and a reproduction blob printed for every failure.
"""
import os

from hypothesis import settings

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
