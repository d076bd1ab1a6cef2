"""lts (Learn to Shard): search how to spread LLM inference over a GPU cluster.

The policy network's matrices are tiny; multi-threaded BLAS only adds stalls on a loaded machine,
so lts asks for one BLAS thread unless the user set it (this must happen before numpy loads).
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

__version__ = "0.1.0"
