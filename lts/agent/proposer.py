"""What the agent does besides sampling from its policy and updating it: the strategies it
proposes itself and where each fresh network starts (issue 13; docs/agent.md).

- **Seeds and sweep** (``Proposer.start``): caller-proposed strategies (``seed``) enter the elite
  history before the first network, followed by a baseline's strategy (``sweep``) at every coarse
  row whose bound beats the best found, best bound first.
- **Restarts** (``Proposer.restart``): each budget chunk starts a fresh network whose output
  biases (``restart_bias``) make it start local (centred on the best elite) or, after a chunk
  that did not improve the best, global (degrees uniform, per-op heads loosely on the elite's);
  after a stalled global chunk comes a local one again.
- **Aimed restarts**: given ``bound`` (an upper bound on each coarse row's throughput that costs
  no call), degrees no valid row has are masked, and the first network and each global restart
  aim at the next-best-bound instance (the coarse row but its batch) instead ("bound"), first
  climbing from the best per-op choices moved there and from the best strategy seen there
  (``_climb``: sweeps of single changes and of groups of heads that pay off together).
- **Proof**: the search ends once no bound beats the best found, which is then the optimum
  (``prove_top``: the k best rows).

Knows nothing about parallelism: strategies are index rows, the first ``Env.coarse`` heads (the
strategy layout's coarse axes the search gives the agent) the coarse row, of which the
``Env.step_head`` head (the batch) is the one a climb steps along.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..specs.strategy import N_COARSE, instance_index


def _prior_bias(sizes, row, probs, kernel=None) -> np.ndarray:
    """Output biases of a fresh network centred on an elite strategy ``row``.

    Head i gives probability probs[i] to row's choice and spreads the rest uniformly; or, where
    kernel[i] > 0 (an ordinal head), its logits are -kernel[i] * |j - row[i]| (neighbouring
    values likely, far ones rare).
    """
    kernel = kernel or [0.0] * len(sizes)
    bias = []
    for n, choice, p, k in zip(sizes, row, probs, kernel):
        b = np.zeros(n)
        if k > 0:
            b = -k * np.abs(np.arange(n) - choice)
        elif n > 1:
            b[choice] = math.log(p * (n - 1) / (1 - p))    # softmax: e^b / (e^b + n - 1) = p
        bias.append(b)
    return np.concatenate(bias)


def restart_bias(sizes, row, kind: str, cfg, switch_heads=(), coarse: int = N_COARSE) -> np.ndarray:
    """Output biases of a fresh network for a restart of ``kind`` around the best elite ``row``.

    local: every head centred on ``row`` (per-op heads ``elite_prior``, the coarse heads the
    ordinal ``coarse_kernel``); global: the coarse heads (and ``switch_heads`` when
    ``global_uniform``) uniform, the other per-op heads ``global_fine`` on ``row``'s choices
    (never below uniform); bound: the coarse heads ordinal around ``row``, the per-op heads as a
    global restart's.
    """
    fine = sizes[coarse:]
    ordinal = [cfg.coarse_kernel] * coarse + [0.0] * len(fine)
    if kind == "bound":         # coarse heads around the target row, per-op as a global restart
        probs = [0.5] * coarse + [max(cfg.global_fine, 1.0 / n) for n in fine]
        for i in switch_heads if cfg.global_uniform else ():
            probs[i] = 1.0 / sizes[i]
        return _prior_bias(sizes, row, probs, ordinal)
    if kind == "global":
        probs = [1.0 / n for n in sizes[:coarse]] + [max(cfg.global_fine, 1.0 / n) for n in fine]
        for i in switch_heads if cfg.global_uniform else ():
            probs[i] = 1.0 / sizes[i]
        return _prior_bias(sizes, row, probs)
    probs = [cfg.elite_prior] * len(sizes)
    return _prior_bias(sizes, row, probs, ordinal)


class Proposer:
    """The strategies the agent proposes besides its policy's samples, and each chunk's start.

    Args:
        env: the ``Env`` whose calls, elite history, best-so-far and per-row bests it reads and
            whose budget its own calls spend.
        cfg: a PPOConfig (the restart, ``seed_points``/``baseline_sweep`` and ``bound_*`` fields).
        bound: optional upper bound on the raw throughput of every strategy of each coarse row,
            shaped ``sizes[:env.coarse]`` (-inf: no valid strategy); see ``bound_mask`` and
            ``bound_restarts``. Read as the search goes (a float64 array of that shape is used
            as is): the evaluator may lower entries in place, e.g. to a row's best once every
            strategy of the row has been tried (lts.search in an engine's space).
        groups: tuples of per-op heads whose choices pay off together; with ``bound_moves`` a
            climb also changes both heads of a pair at once (every combination) and sets a
            larger group's heads to a common value.
        switch_heads: heads whose choice switches the problem's regime (a MoE's expert split);
            a global restart draws them uniformly when ``cfg.global_uniform``.
        prove_top: with ``bound``, what the search must prove before it stops, aims and sweeps
            for: 1, the best (no bound above the best found); k > 1, the k best coarse rows (no
            bound above the k-th best row found, except a row's whose bound its own best
            reaches: a caller lowers a row's bound to its best once every strategy of it was
            tried), e.g. where the caller refines the top k afterwards.
        on_calls: optional callback(n) after every n of its own calls (progress bars).

    State: ``mask`` (added to every fresh network's output biases: -30 on the degrees and
    batches no row of which can be valid), the coarse rows still to aim at (best bound first),
    the last chunk's kind and the best-so-far when it started (for the restart schedule).
    """

    def __init__(self, env, cfg, bound=None, groups=(), switch_heads=(), prove_top: int = 1,
                 on_calls=None):
        self.env, self.cfg, self.groups, self.switch_heads, self.prove_top, self.on_calls = \
            env, cfg, groups, switch_heads, prove_top, on_calls
        sizes = env.sizes
        self.n_coarse = sum(sizes[:env.coarse])
        self.mask = np.zeros(sum(sizes), dtype=np.float32)
        self.targets = np.zeros(0, dtype=np.int64)      # coarse rows to aim at, best bound first
        self.bound = None
        if bound is not None:
            self.bound = np.asarray(bound, dtype=np.float64).reshape(sizes[:env.coarse])
            if cfg.bound_mask:
                live = np.isfinite(self.bound)
                self.mask[:self.n_coarse] = np.concatenate([
                    np.where(live.any(axis=tuple(j for j in range(env.coarse) if j != i)), 0.0,
                             -30.0)
                    for i in range(env.coarse)])
            if cfg.bound_restarts:
                flat = self.bound.ravel()
                targets = np.argsort(-flat, kind="stable")
                self.targets = targets[np.isfinite(flat[targets])]
        self.aiming = self.bound is not None and cfg.bound_restarts
        self.kind = None                # the last chunk's start (None: no chunk yet)
        self.best_at_start = 0.0        # the best-so-far when it started

    def start(self, seed=None, sweep=None) -> None:
        """Evaluator calls before the first network.

        seed: index rows [k, H] evaluated first (counted in the budget), their valid ones in the
        elite history. sweep: index rows [n, H], e.g. a baseline's strategy at each coarse row,
        or a list of such arrays (stages, swept one after the other); with ``baseline_sweep`` and
        a bound, each row whose coarse row's bound beats the best found is tried after the seeds
        (best bound first, the seeds skipped), ``n_steps`` rows a call, re-pruned after each,
        while at most half the budget is spent: the search then ends at least at the baseline's
        best when the sweep fits in half the budget.
        """
        env, sizes = self.env, self.env.sizes
        if seed is not None and len(seed):
            self._probe(seed)
        if sweep is None or self.bound is None or not self.cfg.baseline_sweep:
            return
        stages = [sweep] if isinstance(sweep, np.ndarray) else list(sweep)
        seeded = {r.tobytes() for r in np.asarray(seed, dtype=np.int64)} if seed is not None else ()
        flat = self.bound.ravel()
        for rows in stages:
            rows = np.asarray(rows, dtype=np.int64)
            g = np.ravel_multi_index(tuple(rows[:, :env.coarse].T), sizes[:env.coarse])
            order = np.argsort(-flat[g], kind="stable")
            order = order[np.isfinite(flat[g[order]])]
            done = np.array([r.tobytes() in seeded for r in rows], dtype=bool)  # (tried as seeds)
            while env.calls < env.budget // 2:
                todo = order[~done[order] & self._open_rows(g[order])][:self.cfg.n_steps]
                if not len(todo):
                    break
                done[todo] = True
                self._probe(rows[todo])

    def restart(self):
        """The next chunk's start: (kind, output biases for its fresh network, or None to keep
        the network's own), or None once no coarse row's bound beats the best found (the best is
        then the optimum).

        kind: "fresh" (no elite, or ``elite_prior`` 0), "local", "global" (after a chunk that did
        not improve the best, with ``global_on_stall``; with ``alternate`` not after a stalled
        global or aimed one) or "bound" (the first chunk and each global restart, with
        ``bound_restarts``, while an instance is left to aim at; climbs there first).
        """
        env, cfg = self.env, self.cfg
        if self.aiming and not self._open_rows().any():
            return None
        kind, bias = "fresh", None
        if cfg.elite_prior > 0 and env.elite.rows:
            stalled = self.kind is not None and env.best <= self.best_at_start
            after_global = cfg.alternate and self.kind in ("global", "bound")
            kind = "global" if cfg.global_on_stall and stalled and not after_global else "local"
            bias = restart_bias(env.sizes, env.elite.rows[0], kind, cfg, self.switch_heads,
                                env.coarse)
        if self.aiming and (kind == "global" or self.kind is None):
            aimed = self._aim()
            if aimed is not None:
                kind, bias = "bound", aimed
        self.kind, self.best_at_start = kind, env.best
        return kind, bias

    def _aim(self):
        """Climb at the next target row and return the output biases centred on it (None: no
        target left)."""
        env, sizes = self.env, self.env.sizes
        target = self._next_target()
        if target is None:
            return None
        row = env.elite.rows[0].copy() if env.elite.rows else np.zeros(len(sizes), np.int64)
        row[:env.coarse] = target
        if env.elite.rows:          # the best per-op choices, moved to the target row
            self._climb(row)
        here = env.row_top.get(int(np.ravel_multi_index(tuple(target), sizes[:env.coarse])))
        if here is not None:        # ... and the best strategy seen at the target row
            self._climb(here.copy())
        bias = restart_bias(sizes, row, "bound", self.cfg, self.switch_heads, env.coarse)
        if not env.elite.rows:      # nothing to centre the per-op heads on
            bias[self.n_coarse:] = 0.0
        return bias

    def _next_target(self):
        """The coarse heads of the best-bound row that can still beat the best found, of an
        instance (every coarse head but the batch) not aimed at yet (the local restarts move the
        batch), or None."""
        env = self.env
        shape = env.sizes[:env.coarse]
        self.targets = self.targets[self._open_rows(self.targets)]
        if not len(self.targets):
            return None
        t = self.targets[0]
        self.targets = self.targets[instance_index(self.targets, shape, env.step_head)
                                    != instance_index(t, shape, env.step_head)]
        return np.array(np.unravel_index(t, shape))

    def _open_rows(self, g=None):
        """Whether each coarse row g (flat; None: every row) may still hold what the search
        must find (``prove_top``): its bound beats the best found (k > 1: the k-th best row
        found, and the row's own best)."""
        env, k = self.env, self.prove_top
        ub = self.bound.ravel() if g is None else self.bound.ravel()[g]
        if k <= 1:
            best_raw = env.best * env.ref if env.ref else -np.inf
            return ub > best_raw * (1 + 1e-9)
        found = env.row_raw[np.isfinite(env.row_raw)]
        kth = np.partition(found, -k)[-k] if len(found) >= k else -np.inf
        return (ub > kth * (1 + 1e-9)) & (ub > (env.row_raw if g is None else env.row_raw[g]))

    def _probe(self, rows):
        """Evaluate proposed index rows (within the budget) into the elite history."""
        env = self.env
        rows = np.asarray(rows, dtype=np.int64)[:env.budget - env.calls]
        if not len(rows):
            return np.zeros(0), np.zeros(0, dtype=bool)
        raw, valid, _ = env.step(rows)
        if self.on_calls:
            self.on_calls(len(rows))
        return raw, valid

    def _climb(self, row):
        """Sweeps of single per-op changes from ``row`` (with ``bound_moves`` also the batch
        one step either way, every joint change of a pair of ``groups`` and a larger group set to
        one value; one call each, all of a sweep at once), moving to the best valid one while it
        improves: to a local optimum, or ``bound_sweeps`` sweeps at most when given. Each sweep
        that goes on raises the best, so the climb ends (or the budget does)."""
        sizes, env = self.env.sizes, self.env
        b = env.step_head
        r0, v0 = self._probe(row[None])
        here = float(r0[0]) if len(r0) and v0[0] else -np.inf
        sweeps = self.cfg.bound_sweeps
        for _ in (itertools.count() if sweeps is None else range(sweeps)):
            if env.calls >= env.budget:
                return
            near = [np.r_[row[:h], v, row[h + 1:]] for h in range(env.coarse, len(sizes))
                    for v in range(sizes[h]) if v != row[h]]
            if self.cfg.bound_moves:
                near += [np.r_[row[:b], v, row[b + 1:]]     # the batch, one step
                         for v in (row[b] - 1, row[b] + 1)   # either way
                         if 0 <= v < sizes[b]]
                for g in self.groups:   # a pair: every joint change; a larger group: to one value
                    values = itertools.product(*(range(sizes[h]) for h in g)) if len(g) == 2 \
                        else ((v,) * len(g) for v in range(min(sizes[h] for h in g)))
                    for vs in values:
                        if (row[list(g)] != vs).all() or len(g) > 2 and \
                                (row[list(g)] != vs).sum() > 1:   # (one change: swept above)
                            near.append(row.copy())
                            near[-1][list(g)] = vs
            raw, valid = self._probe(near)
            if not valid.any() or raw[valid].max() <= here:
                return
            i = np.flatnonzero(valid)[np.argmax(raw[valid])]
            row, here = near[i], float(raw[i])
