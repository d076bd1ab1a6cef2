"""agent: the paper's learned searcher: NumPy layers, the attention policy, PPO."""
