"""Bounds for missing arms from a simulator calibration.

A table without a RANDOM or MAJORITY (or TRUE) arm does not identify the whole partition. The
terms it lacks are bounded by the simulator: one vmapped sweep of tabsim's bandit over prior
structures (prior strength, format boost, heterogeneity, learning rate) and algorithm families,
shared by every entry and cached on disk. For an entry, each structure is calibrated to the entry's
base accuracy by interpolating the prior strength; the learning rate (training intensity) is
interpolated on a fine log grid. A calibrated candidate is *consistent* when its simulated base and
every reported trained arm lie within their Bonferroni-corrected intervals; each consistent
candidate completes the table with the reported base plus its simulated gain of each missing arm
(the terms are differences, so their noise stays the reported arms' noise). The bound of a term is
the union of its intervals over the consistent completions. These bounds are model-based: they say
what the table implies *if* the model behaves like some structure of the simulated family.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd
from scipy import stats as sps

import tabsim
from tabsim.audit.completions import logical_completions, with_null_envelope  # noqa: F401 (re-exported)
from tabsim.audit.entry import MAJ_K, PARTITION_ARMS, PASS_K, Entry
from tabsim.audit.estimate import arm_moments, binomial_var
from tabsim.base import defaults
from tabsim.files.atomic import write_frame
from tabsim.runtime.executors import source_digest
from tabsim.runtime.run import run

# Algorithm families of the calibration (a partial config each, and its learning-rate levels).
FAMILY_CONFIGS = {
    # The reference simulator (docs/science.md): on-policy, no ratio and no clip, KL 0.01 in the loss.
    "paper": {"preset": "paper"},
    # Spurious-rewards style reuse: each rollout batch reused for 2 clipped (0.2) full-batch epochs,
    # no KL, token-mean loss, dynamic-sampling filter; clipping makes RANDOM drift toward the mode.
    "reuse": {"preset": "grpo", "algo": {"kl_placement": "none", "beta": 0.0, "epochs": 2, "minibatches": 1,
                                         "aggregation": "token-mean", "filter": True}},
    # The training intensity of the spurious-rewards recipe (docs/science.md, off-policy reuse): each
    # rollout batch reused for 8 clipped (0.2) full-batch epochs, no KL; the learning rate reaches 10x the
    # `reuse` family's lowest level, where the random arm's drift is largest (either sign).
    "reuse8": {"preset": "grpo", "algo": {"kl_placement": "none", "beta": 0.0, "epochs": 8, "minibatches": 1,
                                          "aggregation": "token-mean", "filter": True}},
}
# Default learning-rate levels of each family (its loss scale differs).
FAMILY_LR = {"paper": (0.01, 0.03, 0.1, 0.3, 1.0, 3.0), "reuse": (0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
             "reuse8": (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)}
SIM_ARMS = ("frozen", "random", "majority", "majority_offline", "true")


@dataclasses.dataclass(frozen=True)
class CalibrationGrid:
    """The simulated family: one sweep per (family, n_correct), full factorial of the rest.

    Attributes:
      families: ``(name, lr levels)`` pairs; names from :data:`FAMILY_CONFIGS`.
      prior_strength: p_s levels (the base accuracy is matched by interpolating along them).
      format_boost: f levels (a wrong answer boosted by ``1 + f K``: the format confound).
      heterogeneity: Beta concentrations of per-prompt p_s (small = spread of difficulty).
      n_correct: k levels (static: one compilation each).
      n_prompts, steps, seeds, seed: size of each simulation.
      lr_fine: interpolation points between adjacent lr levels (log scale).
      pass_k, maj_k: exact base-model metrics to simulate (only those some entry reports: maj@k is costly).
    """

    # reuse8 widens the reach to [-10, 5.8] but decides no coverage row the measured range does not
    # (experiments/audits/coverage): an opt-in (--family reuse8), as its sweep doubles a fresh audit's time
    families: tuple = (("paper", (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)),)
    prior_strength: tuple = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98)
    format_boost: tuple = (0.0, 0.5)
    heterogeneity: tuple = (1.0, 10.0)
    n_correct: tuple = (2,)
    n_prompts: int = 40
    steps: int = 100
    seeds: int = 4
    seed: int = 0
    lr_fine: int = 6
    pass_k: tuple = ()
    maj_k: tuple = ()

    def __post_init__(self):
        for name, lrs in self.families:
            if name not in FAMILY_CONFIGS:
                raise ValueError(f"calibration family {name!r} is unknown; allowed: {', '.join(FAMILY_CONFIGS)}")
            if len(lrs) < 1 or any(float(x) <= 0 for x in lrs):
                raise ValueError(f"calibration family {name!r}: lr levels must be > 0, got {lrs}")
        if len(self.prior_strength) < 2:
            raise ValueError(f"prior_strength needs at least 2 levels, got {self.prior_strength}")
        bad = [k for k in self.pass_k if k not in PASS_K] + [k for k in self.maj_k if k not in MAJ_K]
        if bad:
            raise ValueError(f"pass_k / maj_k {bad} not supported; allowed pass_k {list(PASS_K)}, maj_k {list(MAJ_K)}")
        if self.seeds < 2:
            raise ValueError(f"seeds must be >= 2 (the seed spread is used), got {self.seeds}")

    def configs(self) -> list:
        """``(family, n_correct, config dict)`` of each sweep: one compiled, vmapped program each."""
        out = []
        for name, lrs in self.families:
            for k in self.n_correct:
                cfg = {**FAMILY_CONFIGS[name]}
                cfg["task"] = {**cfg.get("task", {}), "env": "bandit", "n_prompts": self.n_prompts, "n_answers": 8,
                               "n_correct": int(k), "heterogeneity": float(self.heterogeneity[0])}
                cfg["arms"] = {"arms": list(SIM_ARMS), "gamma": 0.5, "tie": "lowest", "offline_samples": 64}
                cfg["train"] = {"steps": self.steps, "batch_size": 16, "group_size": 8, "seeds": self.seeds,
                                "seed": self.seed, "pass_k": list(self.pass_k), "maj_k": list(self.maj_k)}
                cfg["sweep"] = {"prior_strength": [float(x) for x in self.prior_strength],
                                "format_boost": [float(x) for x in self.format_boost],
                                "heterogeneity": [float(x) for x in self.heterogeneity],
                                "lr": [float(x) for x in lrs]}
                out.append((name, int(k), cfg))
        return out

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["families"] = [[n, list(l)] for n, l in self.families]
        d["family_configs"] = {n: FAMILY_CONFIGS[n] for n, _ in self.families}
        return d

    def digest(self) -> str:
        """Hash of the grid and of tabsim's sources (every module: a list of the modules that decide a
        simulation's numbers went stale when modules moved): the on-disk cache key."""
        h = hashlib.sha256(json.dumps([self.as_dict(), self.configs()], sort_keys=True).encode())
        h.update(tabsim.__version__.encode())
        h.update(source_digest().encode())
        return h.hexdigest()[:20]


def default_cache_dir() -> Path:
    """tabsim's cache folder (:func:`tabsim.base.defaults.cache_home`): ``$TABSIM_CACHE``, else
    ``$XDG_CACHE_HOME/tabsim`` (``~/.cache/tabsim``)."""
    return defaults.cache_home()


_MEMO: dict = {}
# The progress bar's label while the calibration sweeps train (not `tabsim run`'s: no run was asked for).
PHASE = "tabsim audit: calibrating"


def simulate(grid: CalibrationGrid, *, cache_dir: Optional[Path] = None, progress: bool = False,
             executor=None, log: Callable[[str], None] | None = None, device=None,
             precision: str | None = None) -> tuple:
    """Final metrics of every arm x seed x structure of ``grid`` (cached in memory and on disk).

    Args:
      grid: the simulated family.
      cache_dir: folder for the cached frame (None: no disk cache).
      progress: show tabsim's progress bar.
      executor: where the sweep's chunks run (default in this process; see :mod:`tabsim.runtime.executors`).
      log: where each sweep, or the cache read instead, is said (one line each; default: nowhere).
      device, precision: as :func:`tabsim.runtime.run.run` takes them.

    Returns:
      ``(frame, info)``: tidy frame with columns ``family, n_correct, prior_strength, format_boost,
      heterogeneity, lr, seed, arm, pass1, pass@k..., maj@k...`` (accuracies in percent) and a dict
      ``{"digest", "cache": "memory"|"disk"|"computed", "seconds"}``.
    """
    say = log or (lambda msg: None)
    key = grid.digest()
    if key in _MEMO:
        say("calibration: computed earlier in this process")
        return _MEMO[key], {"digest": key, "cache": "memory", "seconds": 0.0}
    path = Path(cache_dir) / f"audit-calibration-{key}.parquet" if cache_dir else None
    if path is not None and path.exists():
        try:
            frame = pd.read_parquet(path)
            _MEMO[key] = frame
            say(f"calibration: read from the cache ({path})")
            return frame, {"digest": key, "cache": "disk", "seconds": 0.0}
        except Exception:  # a corrupt cache file is recomputed
            pass
    t0 = time.perf_counter()
    parts = []
    sweeps = grid.configs()
    for i, (name, k, cfg) in enumerate(sweeps):
        n_cond = math.prod(len(v) for v in cfg["sweep"].values())
        say(f"calibration sweep {i + 1} of {len(sweeps)}: family {name} (k = {k}), {n_cond} conditions x "
            f"{grid.seeds} seeds x {len(SIM_ARMS)} arms, {grid.steps} steps: compiling, then training")
        fin = run(cfg, progress=progress, executor=executor, desc=f"{PHASE} {i + 1} of {len(sweeps)}", device=device,
                  precision=precision).final()
        keep = ["prior_strength", "format_boost", "heterogeneity", "lr", "seed", "arm", "pass1"]
        keep += [c for c in fin.columns if c.startswith(("pass@", "maj@"))]
        fin = fin[keep].copy()
        for c in keep[6:]:
            fin[c] = 100.0 * fin[c].astype(float)
        fin["arm"] = fin["arm"].astype(str)
        fin.insert(0, "n_correct", int(k))
        fin.insert(0, "family", name)
        parts.append(fin)
    frame = pd.concat(parts, ignore_index=True)
    say(f"calibration computed in {time.perf_counter() - t0:.1f} s" + (f"; keeping it in {path}" if path else ""))
    if path is not None:
        try:
            write_frame(path, frame)
        except OSError:  # an unwritable cache folder only costs the next run its time
            pass
    _MEMO[key] = frame
    return frame, {"digest": key, "cache": "computed", "seconds": round(time.perf_counter() - t0, 2)}


STRUCTURE = ("family", "n_correct", "format_boost", "heterogeneity")


@dataclasses.dataclass
class _Structure:
    """Seed means and standard errors of one structure, on the (lr, prior) grid."""

    key: dict
    lr: np.ndarray  # [L]
    prior: np.ndarray  # [P]
    frozen: np.ndarray  # [P] seed-mean base accuracy (independent of lr)
    mean: dict  # arm -> [L, P]
    se: dict  # arm -> [L, P]
    base_k: dict  # "pass@k"/"maj@k" -> ([P] mean, [P] se) of the frozen arm


def structures(frame: pd.DataFrame) -> list[_Structure]:
    """Group the calibration frame by structure into interpolation tables."""
    out = []
    metrics = [c for c in frame.columns if c.startswith(("pass@", "maj@"))]
    for key, sub in frame.groupby(list(STRUCTURE), sort=True):
        g = sub.groupby(["lr", "prior_strength", "arm"])["pass1"].agg(["mean", "std", "count"])
        lrs = np.sort(sub["lr"].unique())
        priors = np.sort(sub["prior_strength"].unique())
        mean, se = {}, {}
        for arm in SIM_ARMS:
            t = g.xs(arm, level="arm")
            mean[arm] = t["mean"].unstack("prior_strength").loc[lrs, priors].to_numpy()
            se[arm] = (t["std"] / np.sqrt(t["count"])).unstack("prior_strength").loc[lrs, priors].to_numpy()
        fz = sub[sub["arm"] == "frozen"]
        base_k = {}
        for mname in metrics:
            t = fz.groupby("prior_strength")[mname].agg(["mean", "std", "count"]).loc[priors]
            base_k[mname] = (t["mean"].to_numpy(), (t["std"] / np.sqrt(t["count"])).to_numpy())
        frozen = mean["frozen"].mean(axis=0)
        out.append(_Structure(dict(zip(STRUCTURE, key)), lrs, priors, frozen, mean, se, base_k))
    return out


def _fine_lr(lrs: np.ndarray, n: int) -> np.ndarray:
    if lrs.size == 1:
        return lrs.copy()
    logs = np.log(lrs)
    pts = [np.linspace(logs[i], logs[i + 1], n + 1)[:-1] for i in range(lrs.size - 1)] + [logs[-1:]]
    return np.exp(np.concatenate(pts))


def _interp_rows(x, xp, table):
    """Interpolate each row of ``table [L, P]`` at ``x [B]`` along ``xp [P]`` -> ``[B, L]``."""
    return np.stack([np.interp(x, xp, row) for row in table], axis=1)


def _interp_lr(fine, lrs, vals):
    """``vals [B, L]`` linear in log lr, evaluated at ``fine [F]`` -> ``[B, F]``."""
    if lrs.size == 1:
        return vals
    return np.stack([np.interp(np.log(fine), np.log(lrs), v) for v in vals], axis=0)


@dataclasses.dataclass
class Calibration:
    """The consistent completions of one entry.

    Attributes:
      means, variances: ``[C, 4]`` arm accuracies (frozen, random, majority, true) of each consistent
        completion; reported arms keep their reported values and variances, a missing arm is the
        reported base plus the candidate's simulated gain (clipped to [0, 100]).
      candidates: frame, one row per calibrated candidate (structure, lr, base, p_s, simulated arms,
        consistent flag).
      n_candidates, n_consistent: counts.
      constraints: the quantities that were matched.
      z: the Bonferroni-corrected normal quantile used.
    """

    means: np.ndarray
    variances: np.ndarray
    candidates: pd.DataFrame
    n_candidates: int
    n_consistent: int
    constraints: list
    z: float


def calibrate_entry(entry: Entry, structs: list, *, grid: CalibrationGrid, ci: float = 0.95, seed_sd: float = 0.0,
                    majority_kind: Optional[str] = None, n_base: int = 5, unit: str = "items") -> Calibration:
    """Calibrate every structure to ``entry`` and keep the candidates consistent with its arms.

    Constraints (Bonferroni over their number ``m``, ``z = Phi^-1(1 - (1 - ci) / (2 m))``): the
    simulated base lies in ``b +/- z se_b`` (``n_base`` points across it, each solved for p_s); each
    reported trained arm ``a`` (and base pass@k / maj@k) satisfies
    ``|sim_a - obs_a| <= z sqrt(var_a + se_sim_a^2)``. A reported RANDOM arm with gamma != 0.5 is not
    a constraint (the family simulates gamma = 0.5).

    Args:
      entry: the validated entry.
      structs: output of :func:`structures`.
      grid: the grid (for its lr interpolation density).
      ci: level of the intervals.
      seed_sd: assumed seed sd of single runs (points); added to missing arms' variance too.
      majority_kind: ``"online"`` or ``"offline"`` majority to simulate (default: the entry's, else online).
      n_base: points across the base interval.
      unit: sampling unit of the reported arms' variances (:func:`tabsim.audit.estimate.arm_moments`).

    Returns:
      :class:`Calibration`.
    """
    kind = majority_kind or entry.majority_kind or "online"
    sim_arm = {"frozen": "frozen", "random": "random", "true": "true",
               "majority": "majority" if kind == "online" else "majority_offline"}
    mean, var, _ = arm_moments(entry, seed_sd=seed_sd, unit=unit)
    fitted = [a for a in ("random", "majority", "true") if a in mean
              and not (a == "random" and entry.gamma is not None and abs(entry.gamma - 0.5) > 1e-9)]
    kcons = [(f"pass@{k}", v) for k, v in entry.base_pass_at_k.items()] + \
            [(f"maj@{k}", v) for k, v in entry.base_maj_at_k.items()]
    m = 1 + len(fitted) + len(kcons)
    alpha = 1.0 - ci
    z = float(sps.norm.ppf(1.0 - alpha / (2.0 * m)))
    b, se_b = mean["frozen"], float(np.sqrt(var["frozen"]))
    bases = b + z * se_b * np.linspace(-1.0, 1.0, n_base)

    rows, comp_m, comp_v = [], [], []
    for st in structs:
        fit = _fit_structure(st, bases, grid, sim_arm)
        if fit is None:
            continue
        bb, p_star, fine, sim_m, sim_s = fit
        ok = np.ones(sim_m["frozen"].shape, dtype=bool)
        for arm in fitted:
            ok &= np.abs(sim_m[arm] - mean[arm]) <= z * np.sqrt(var[arm] + sim_s[arm] ** 2)
        for name, val in kcons:
            if name not in st.base_k:
                ok &= False
                continue
            km, ks = (np.interp(p_star, st.prior, x) for x in st.base_k[name])
            tol = z * np.sqrt(binomial_var(val, entry.n_items) + ks ** 2)
            ok &= (np.abs(km - val) <= tol)[:, None]
        rows += _candidate_rows(st, bb, p_star, fine, sim_m, ok)
        for i, j in np.argwhere(ok):
            cm, cv = _completion(mean, var, sim_m, sim_s, i, j, seed_sd=seed_sd)
            comp_m.append(cm)
            comp_v.append(cv)
    cand = pd.DataFrame(rows)
    n_cons = len(comp_m)
    constraints = ["base"] + fitted + [n for n, _ in kcons]
    empty = np.zeros((0, 4))
    return Calibration(means=np.asarray(comp_m) if comp_m else empty, variances=np.asarray(comp_v) if comp_v else empty,
                       candidates=cand, n_candidates=len(cand), n_consistent=n_cons, constraints=constraints, z=z)


def _fit_structure(st: _Structure, bases: np.ndarray, grid: CalibrationGrid, sim_arm: dict) -> Optional[tuple]:
    """One structure calibrated to the base targets it reaches: ``(targets [B], p_s [B], fine lr [F],
    simulated means {arm: [B, F]}, their standard errors)``; None when it reaches none."""
    f = np.maximum.accumulate(st.frozen)
    inside = (bases >= f[0]) & (bases <= f[-1])
    if not inside.any():
        return None
    bb = bases[inside]
    # frozen is nondecreasing in p_s; a flat stretch makes interp pick its first point
    p_star = np.interp(bb, f + np.arange(f.size) * 1e-9, st.prior)
    fine = _fine_lr(st.lr, grid.lr_fine)
    sim_m, sim_s = {}, {}
    for arm in PARTITION_ARMS:
        a = sim_arm[arm]
        sim_m[arm] = _interp_lr(fine, st.lr, _interp_rows(p_star, st.prior, st.mean[a]))  # [B, F]
        sim_s[arm] = _interp_lr(fine, st.lr, _interp_rows(p_star, st.prior, st.se[a]))
    return bb, p_star, fine, sim_m, sim_s


def _candidate_rows(st: _Structure, bb, p_star, fine, sim_m: dict, ok: np.ndarray) -> list[dict]:
    """One record per calibrated candidate (base target x lr) of a structure, consistent or not."""
    rows = []
    B, F = ok.shape
    for i in range(B):
        for j in range(F):
            row = {**st.key, "lr": float(fine[j]), "base_target": float(bb[i]), "prior_strength": float(p_star[i]),
                   "consistent": bool(ok[i, j])}
            row.update({f"sim_{a}": float(sim_m[a][i, j]) for a in PARTITION_ARMS})
            rows.append(row)
    return rows


def _completion(mean: dict, var: dict, sim_m: dict, sim_s: dict, i, j, *, seed_sd: float) -> tuple[list, list]:
    """The table completed by candidate ``(i, j)``: reported arms as reported, missing ones simulated."""
    cm, cv = [], []
    for arm in PARTITION_ARMS:
        if arm in mean:
            cm.append(mean[arm])
            cv.append(var[arm])
        else:
            # the simulated gain over the simulated base, carried over to the reported base: the
            # terms are differences, so their noise is then the reported arms' noise only
            gain = float(sim_m[arm][i, j] - sim_m["frozen"][i, j])
            cm.append(min(max(mean["frozen"] + gain, 0.0), 100.0))
            cv.append(float(sim_s[arm][i, j]) ** 2 + seed_sd ** 2)
    return cm, cv


REACH_TERMS = ("d_null", "d_majority", "d_elicit", "d_rd", "d_total")


def family_reach(frame: pd.DataFrame) -> dict:
    """What each simulated family can produce: the range of every term over its structures.

    Seed means per condition (structure x prior strength x lr); the majority terms take both the online
    and the offline majority arm. Returns ``{family: {term: [low, high]}}`` in points.
    """
    cond = ["family", "n_correct", "prior_strength", "format_boost", "heterogeneity", "lr"]
    wide = frame.groupby(cond + ["arm"])["pass1"].mean().unstack("arm")
    out = {}
    for fam, w in wide.groupby(level="family"):
        vals = {"d_null": [w["random"] - w["frozen"]], "d_total": [w["true"] - w["frozen"]]}
        for m in ("majority", "majority_offline"):
            vals.setdefault("d_majority", []).append(w[m] - w["frozen"])
            vals.setdefault("d_elicit", []).append(w[m] - w["random"])
            vals.setdefault("d_rd", []).append(w["true"] - w[m])
        out[str(fam)] = {t: [round(float(min(x.min() for x in vals[t])), 2), round(float(max(x.max() for x in vals[t])), 2)]
                         for t in REACH_TERMS}
    return out
