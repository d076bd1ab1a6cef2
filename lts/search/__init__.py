"""search: problems, the exact solvers, the baselines, two-pool sizing and the method registry."""
