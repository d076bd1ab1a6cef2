"""The ranges every value from a flag or a measurement file must fall in (one rule per kind of
value; files' keys have theirs in ``specs.model``). Imports nothing from lts.

They keep lts's arithmetic finite and its runs bounded: a degree or a token count beyond them is
refused with the limit in the message, never costed.
"""
MAX_TOKENS = 10_000_000       # tokens per request or sequence: --context, --isl, --osl, isl, osl
MAX_CONCURRENCY = 10_000_000  # requests in flight: --concurrency, a batch, a concurrency cell
MAX_DEGREE = 65_536           # tp, ep, pp, cp of a strategy
MAX_CP = 64                   # --max-cp: context-parallel degrees a search holds (a 1M-token
                              # prompt over 64 ranks: 16k tokens each)
MAX_ETP = 64                  # --moe-tp: expert-tensor-parallel degrees a search holds (the
                              # space's tp stops at 64: specs.strategy.Space.for_model)
MAX_GPUS = 2**36              # a measurement's gpus (a topology holds at most 65,536 x 1,048,576)
MAX_MEASURED = 1e15           # a measured value (tokens/s or ms)
MIN_MEASURED = 1e-6           # ... and its least (a nanosecond in ms; a token per 11 days)
MAX_OFFLOAD_GIB = 65_536      # --kv-offload, GiB of host memory per GPU (64 TiB: beyond any host)
MAX_REQUEST_RATE = 1e9        # --request-rate, requests/s (a billion: beyond any deployment)
MAX_SEED = 2**63 - 1          # --seed: numpy's generators take seeds 0 .. 2^63-1 here
MAX_TOP = 1000                # --top: rows to list
# --top of an exact serve search, which solves rows until the k-th best deployment is proved:
# moe1.6t on h100_dgx, whole command, 2-core machine (2026-11-26, after issue 26's bounds): 6.0 s
# at --top 100 (7.4 s with --ttft-slo-ms 2000 --tpot-slo-ms 50), 21 s and 42 s at 1000
MAX_SERVE_TOP = 100
MAX_SEEDS = 1000              # --seeds of compare
MAX_JOBS = 3                  # sweep --jobs: a worker peaks at its largest problem's: 637 MB
                              # max RSS for the heaviest shipped search (qwen3.5-397b-a17b or
                              # llama4-maverick h100_dgx --phase serve, the whole cluster;
                              # the example grid's 295 MB), so 3 and the parent (~0.1 GB)
                              # stay under 2 GiB; beyond the cores no help
MAX_BENCH = 10_000_000        # bench --evaluations: the rows are held in memory at once
# requests one simulated run holds at most (lts simulate --num-prompts, a trace's rows, a
# measurement's num_prompts): 10 x C at C = 100,000; the run keeps a few lists of this length
MAX_SIM_REQUESTS = 1_000_000
