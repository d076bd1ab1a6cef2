"""launch: engine command lines for a found strategy (one pool or two)."""
