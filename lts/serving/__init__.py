"""serving: the closed loop an engine runs under a benchmark, and validation against measurements."""
