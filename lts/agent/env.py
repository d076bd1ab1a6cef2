"""The agent's environment (Learning to Shard, §3-4; docs/paper.md §4-5): evaluator calls and what they
leave behind.

One step is one batch of evaluator calls. The observation is the elite history X (the T best
valid strategies so far, each a record of normalized sub-action indices plus its normalized
throughput), the action is a full strategy (one index per head), the reward is

    r = alpha * raw + beta * (raw - best_so_far)      (Eq. 1; raw = tokens/s/GPU / reference)

for a valid strategy and ``invalid_reward`` otherwise, and the episode ends (one step, bandit
style). ``Env`` also keeps what the bound-guided proposer (lts.agent.proposer) reads: the calls
spent, the best valid strategy seen at each coarse row (the first ``N_COARSE`` heads: tp, ep,
pp, batch) and, when asked, every strategy tried.

Written against a callback ``evaluate(index_rows [n, H]) -> (raw [n], valid [n])`` so that it knows
nothing about parallelism beyond how many heads the coarse row has (the agent is reusable, as
CleanRL's are).
"""
from __future__ import annotations

import numpy as np

from ..specs.strategy import BATCH, N_COARSE


class EliteHistory:
    """The T best valid strategies seen, best first, without duplicates (docs/paper.md §4.2)."""

    def __init__(self, sizes, T: int):
        self.sizes = np.asarray(sizes)
        self.scale = np.maximum(self.sizes - 1, 1)
        self.T = T
        self.rows, self.raw = [], []

    def add(self, row: np.ndarray, raw: float) -> None:
        key = row.tobytes()
        if any(r.tobytes() == key for r in self.rows):
            return
        if len(self.rows) < self.T or raw > self.raw[-1]:
            self.rows.append(row.copy())
            self.raw.append(raw)
            order = np.argsort(self.raw)[::-1][: self.T]
            self.rows = [self.rows[i] for i in order]
            self.raw = [self.raw[i] for i in order]

    def observation(self) -> np.ndarray:
        """[1, T, H + 1]: normalized indices and normalized throughput, zero-padded."""
        X = np.zeros((1, self.T, len(self.sizes) + 1))
        for t, (row, raw) in enumerate(zip(self.rows, self.raw)):
            X[0, t, :-1] = row / self.scale
            X[0, t, -1] = raw
        return X


class Env:
    """Evaluator calls within a budget, with the elite history, the best-so-far and Eq. 1's reward.

    Args:
        evaluate: callback index rows [n, H] -> (raw tokens/s/GPU [n], valid [n] bool).
        sizes: number of choices of each of the H heads; the first ``N_COARSE`` are the coarse
            row.
        budget: evaluator calls the search may spend (``calls`` counts them).
        cfg: a PPOConfig (``history``, ``alpha``, ``beta``, ``invalid_reward``).
        keep: keep every strategy tried (``tried``); False keeps memory flat in the budget.
    """

    def __init__(self, evaluate, sizes, budget: int, cfg, keep: bool = True,
                 coarse: int = N_COARSE, step_head: int = BATCH):
        self.evaluate, self.sizes, self.budget, self.cfg, self.keep = \
            evaluate, sizes, budget, cfg, keep
        self.elite = EliteHistory(sizes, cfg.history)
        self.calls = 0
        self.ref = None         # reference throughput: the first valid strategy's (docs/paper.md §5.1)
        self.best = 0.0         # best-so-far in normalized units (b of Eq. 1)
        # the first ``coarse`` heads are the coarse row, ``step_head`` the one a climb steps
        # along (the batch): the strategy layout's unless the caller gives the agent fewer heads
        self.coarse, self.step_head = coarse, step_head
        self.row_raw = np.full(int(np.prod(sizes[:coarse])), -np.inf)  # coarse row -> best raw
        self.row_top = {}       # coarse row (flat) -> the strategy of that best raw
        self._rows, self._raw, self._valid = [], [], []

    def observation(self) -> np.ndarray:
        """[1, T, H + 1]: the elite history (docs/paper.md §4.2)."""
        return self.elite.observation()

    def step(self, actions: np.ndarray):
        """Evaluate index rows [n, H]; returns (raw [n], valid [n], rewards [n]): Eq. 1 against
        the best-so-far before these calls, which then enter the elite history and the best."""
        raw, valid = self.evaluate(actions)
        self.calls += len(actions)
        norm = self._normalize(raw, valid)
        rewards = np.where(valid, self.cfg.alpha * norm + self.cfg.beta * (norm - self.best),
                           self.cfg.invalid_reward)
        self._remember(actions, raw, valid, norm)
        return raw, valid, rewards

    def tried(self):
        """(index rows [calls, H], raw [calls], valid [calls]) of every strategy tried (empty
        without ``keep``)."""
        if not self._rows:
            return np.zeros((0, len(self.sizes)), np.int64), np.zeros(0), np.zeros(0, bool)
        return np.concatenate(self._rows), np.concatenate(self._raw), np.concatenate(self._valid)

    def _normalize(self, raw, valid):
        """Throughput over the reference (set by the first valid strategy, docs/paper.md §5.1)."""
        if self.ref is None and valid.any():
            self.ref = float(raw[valid][0])
        return raw / self.ref if self.ref else np.zeros(len(raw))

    def _remember(self, actions, raw, valid, norm):
        """The valid strategies into the elite history, each coarse row's best and the
        best-so-far b."""
        for a, v, r, x in zip(actions, valid, norm, raw):
            if v:
                self.elite.add(a, float(r))
                g = int(np.ravel_multi_index(tuple(a[:self.coarse]), self.sizes[:self.coarse]))
                if x > self.row_raw[g]:
                    self.row_raw[g] = float(x)
                    self.row_top[g] = a
        if valid.any():
            self.best = max(self.best, float(norm[valid].max()))
        if self.keep:
            self._rows.append(actions)
            self._raw.append(raw)
            self._valid.append(valid)
