"""What recommend would pick in each drawn world once a set of probes is measured, for many
candidate probes at once: the plan's inner loop (value.py asks it for every probe it weighs, at
every greedy step).

Every number is the one a probe-at-a-time evaluation gives (the same operations on the same
values, in the same order); what makes it fast is only what it leaves out or does once:
- the probes of one greedy step are weighed together, in chunks that stay in the CPU's caches,
  into buffers allocated once (fresh multi-MB arrays cost page faults on every call);
- types whose weights are equal (the sizes of one device) share one re-anchoring shift, so its
  exp is taken once per device, not per type;
- a candidate that another candidate with a lower index beats or equals in every part (objective,
  cost, deadline hours) and that moves by the same factor in every world can never be argmin's
  answer, so it is not evaluated (the same offer in a dearer region, a bigger size of one device).
"""

from __future__ import annotations

import numpy as np

# (probe, candidate, world) values per chunk: a few MB per array.
CHUNK = 1 << 18
# The dominance test compares candidates pairwise; past this many it is skipped (all are evaluated).
MAX_PAIRWISE = 1024


class Picks:
    def __init__(self, econ, bel, f_obs: np.ndarray, log_obs: np.ndarray, held: np.ndarray):
        self.econ, self.bel, self.f_obs, self.log_obs, self.held = econ, bel, f_obs, log_obs, held
        self.draws = f_obs.shape[0]
        # What recommend decides on: the fixed parts, and the var parts per band state (decide).
        self.obj_fix = econ.hours_fix if econ.objective == "fastest" else econ.cost_fix
        self.obj_var = econ.decision_obj_var()
        self.by_cost = econ.objective != "fastest"  # cheapest and pareto: the objective is the cost
        # The types in play (per candidate its column) and one type per distinct column of weights.
        self.cols, col_of = np.unique(econ.type_idx, return_inverse=True)
        _, first, rep = np.unique(bel.weight[:, self.cols], axis=1, return_index=True, return_inverse=True)
        self.reps = self.cols[first]
        # Per candidate, its factor's row when nothing of its own is probed: its device's shift
        # (an estimate that moves) or the row of ones (one that does not).
        self.base_src = np.where(bel.moves[self.cols], rep.ravel(), len(self.reps))[col_of]
        # Adding a fixed part of 0 changes no value: skipped when there is none (no setup time).
        self.fixed = bool(econ.cost_fix.any() or econ.pess_fix.any() or self.obj_fix.any())
        n = len(econ)
        self.beats = None  # beats[a, b]: a < b and a no worse than b in every part
        if 1 < n <= MAX_PAIRWISE:
            d = econ.decide
            parts = np.column_stack([self.obj_fix, *self.obj_var, econ.cost_fix, *d["cost"], econ.pess_fix,
                                     *d["pess"]])
            self.beats = np.triu((parts[:, None, :] <= parts[None, :, :]).all(axis=2), k=1)
        self.step = max(1, CHUNK // max(self.draws * n, 1))
        self._buf: dict[str, np.ndarray] | None = None

    def after(self, chosen: list[int], options: list[int], waits: np.ndarray) -> np.ndarray:
        """(len(options), draws): the pick in each world once chosen + [t] are measured, for each
        option t, with the deadline less waits[i]; -1 where nothing fits."""
        out = np.empty((len(options), self.draws), dtype=np.int64)
        for i in range(0, len(options), self.step):
            out[i:i + self.step] = self._chunk(chosen, options[i:i + self.step], waits[i:i + self.step])
        return out

    def _buffers(self, size: int) -> dict[str, np.ndarray]:
        if self._buf is None or len(self._buf["ft"]) < size:
            self._buf = {name: np.empty(size, dtype=dt) for name, dt in
                         (("ft", float), ("a", float), ("b", float), ("ok", bool), ("ok2", bool),
                          ("first", np.min_scalar_type(len(self.econ))))}
        return self._buf

    def _chunk(self, chosen: list[int], options: list[int], waits: np.ndarray) -> np.ndarray:
        e, bel, draws = self.econ, self.bel, self.draws
        n, k, r = len(options), len(chosen) + 1, len(self.reps)
        # Per candidate, where its factor comes from: its device's shift, 1, or its own probe.
        src = self.base_src.copy()
        for j, s in enumerate(chosen):
            src[e.type_idx == s] = r + 1 + j
        idx = self._undominated(src, options)
        src = src[idx]
        # The shifts the candidates left to evaluate read, one row each; then a row of ones, then
        # each probe's own observed factor.
        used = np.flatnonzero(np.bincount(src[src < r], minlength=r))
        u = len(used)
        row_of = np.concatenate([np.full(r, -1), np.arange(u, u + k + 1)])
        row_of[used] = np.arange(u)
        rows = u + 1 + k
        mine = e.type_idx[idx][None, :] == np.asarray(options)[:, None]  # (probe, candidate): its own
        # Each candidate's band state (value.AS_IS, MEASURED, SIBLING) for each option: measured (a
        # chosen probe's type, or the option's own), else re-anchored by a probe of its device's
        # other size (an estimate: one that moves), else as it stands. With one state (confidence 0) all read row 0.
        n_states = len(e.decide["cost"])
        if n_states > 1:
            group = self.bel.group[e.type_idx[idx]]
            sib = (np.isin(group, self.bel.group[chosen])[None, :] | (group[None, :] == self.bel.group[options][:, None]))
            state = np.where(sib & self.bel.moves[e.type_idx[idx]][None, :], min(2, n_states - 1), 0)
            state[mine | np.isin(e.type_idx[idx], chosen)[None, :]] = 1
        else:
            state = np.zeros((n, len(idx)), dtype=np.int64)
        src = np.where(mine, rows - 1, row_of[src][None, :]) + (np.arange(n) * rows)[:, None]
        # Each used weight column's re-anchoring shift, exp'd: the probes' log ratios weighted (as
        # value._Worlds.pick_after describes), laid out (probe, column, world).
        reps = self.reps[used]
        w = np.empty((n, k, u))
        w[:, :-1] = bel.weight[chosen][:, reps]
        w[:, -1] = bel.weight[options][:, reps]
        den = w[:, 0].copy()
        for j in range(1, k):  # row by row, as a sum over the probes' rows adds them
            den += w[:, j]
        den += self.held[reps]
        obs = np.empty((n, k, draws))
        obs[:, :-1] = self.log_obs[:, chosen].T
        obs[:, -1] = self.log_obs[:, options].T
        table = np.empty((n, rows, draws))
        with np.errstate(invalid="ignore", divide="ignore"):
            np.exp(np.where(den[:, :, None] > 0, (w.transpose(0, 2, 1) @ obs) / den[:, :, None], 0.0),
                   out=table[:, :u])
        table[:, u] = 1.0
        table[:, u + 1:-1] = self.f_obs[:, chosen].T
        table[:, -1] = self.f_obs[:, options].T

        m = len(idx)
        buf = self._buffers(n * m * draws)
        ft, a, b, ok, ok2, first = (v[:n * m * draws].reshape(n, m, draws) for v in buf.values())
        np.take(table.reshape(-1, draws), src, axis=0, out=ft)
        def decide(var2):  # (states, N) var parts -> (probe, candidate, 1) in the band state each is in
            return var2[:, idx][state, np.arange(len(idx))[None, :]][:, :, None]

        cost = np.divide(decide(e.decide["cost"]), ft, out=a)
        pess = np.divide(decide(e.decide["pess"]), ft, out=b)
        if self.fixed:
            cost += e.cost_fix[idx, None]
            pess += e.pess_fix[idx, None]
        np.less_equal(pess, (e.deadline_hours - waits)[:, None, None], out=ok)
        if self.by_cost:
            # Cheapest among those that meet the deadline, feasible if within the budget: the same
            # answer as the cheapest among those within both (a dearer one never undercuts it).
            obj = cost
        else:
            ok &= np.less_equal(cost, e.budget_usd, out=ok2)
            obj = np.divide(decide(self.obj_var), ft, out=b)
            obj += self.obj_fix[idx, None]
            poison = (np.isnan(obj, out=ok2) & ok).any(axis=1)  # argmin would answer a NaN: no pick
        # obj + 0 where ok, + inf where not (no branch per element, unlike np.where with a mask).
        with np.errstate(divide="ignore"):
            pen = np.divide(1.0, ok, out=ft)
        pen -= 1.0
        obj += pen
        best = np.fmin.reduce(obj, axis=1)  # NaN (no figure) counts as not fitting
        # argmin's answer: the first candidate holding the minimum.
        np.equal(obj, best[:, None, :], out=ok)
        np.multiply(ok, (m - np.arange(m)).astype(first.dtype)[None, :, None], out=first)
        j = m - first.max(axis=1).astype(np.int64)
        valid = best <= e.budget_usd if self.by_cost else np.isfinite(best) & ~poison
        return np.where(valid, idx[np.minimum(j, m - 1)], -1)

    def _undominated(self, src: np.ndarray, options: list[int]) -> np.ndarray:
        """Candidates that may be argmin's answer for some probe of this chunk: those no
        candidate with a lower index, moving by the same factor, beats or equals in every part.
        Only pairs of candidates none of whose types is probed in the chunk count (a probe of one
        of them would give it a factor of its own)."""
        if self.beats is None:
            return np.arange(len(self.econ))
        probed = np.zeros(len(self.bel.group), dtype=bool)
        probed[options] = True
        free = ~probed[self.econ.type_idx]
        same = (src[:, None] == src[None, :]) & free[:, None] & free[None, :]
        return np.flatnonzero(~(self.beats & same).any(axis=0))
