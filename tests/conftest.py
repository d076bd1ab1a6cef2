"""Hypothesis profiles: ``dev`` (default) and ``ci`` (deterministic; loaded when CI=true); the
number of pytest-xdist workers ``-n auto`` starts (pyproject.toml's addopts).

The ``ci`` profile follows numpy's conftest: derandomized, no example database, no deadline (CI
machines are slow and uneven), and a reproduction blob printed for every failure.
"""
import os

from hypothesis import settings

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


MAX_WORKERS = 4     # a worker holds up to ~1 GiB (a whole run's largest: 1.0 GB max RSS)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core this process may run on, at most MAX_WORKERS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, MAX_WORKERS))
