"""Preset benchmark: cost per update of every preset relative to plain GRPO in the same run, the cost
of reuse schedules against their number of updates, and a plain NumPy GRPO update for scale.

    python experiments/bench_presets.py [--quick]

Every preset runs the same bandit (N prompts, K = 8, B prompts x G answers per rollout batch, one
``true`` arm, S seeds, ``steps`` rollout batches) with its own composition and reuse schedule; a
preset's updates per rollout batch are ``epochs x minibatches``. Timings are the best of 3 calls of
the compiled program (compilation excluded). Columns:

* ``updates_per_s``: seeds x updates / second; ``rel_cost_per_update``: seconds per update over
  plain GRPO's (``grpo`` preset, one update per batch) in the same run;
* ``batch_cost_over_updates``: seconds per rollout batch / (updates per batch x GRPO's seconds per
  batch). A reuse schedule costs no more than its extra updates when this is <= 1 (rollout,
  rewards and advantages are shared by its updates); the check allows 10% timing noise.

The NumPy reference is one ``grpo``-preset update (sample, reward, z-score, clipped loss with k3 KL,
its exact logit gradient, SGD step) vectorised over the batch, looping over seeds; its gradient is
checked against tabsim's ``policy_loss`` gradient on the same batch. The last line printed is JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

REUSE = {"grpo_e2": {"epochs": 2}, "grpo_e4": {"epochs": 4}, "grpo_e8": {"epochs": 8},
         "grpo_e2_mb4": {"epochs": 2, "minibatches": 4}}
NOISE = 1.10


def make_config(preset: str, algo: dict, size: dict) -> dict:
    return {"preset": preset, "task": {"n_prompts": size["N"], "n_answers": 8, "n_correct": 2},
            "arms": {"arms": ["true"]}, "algo": dict(algo),
            "train": {"steps": size["steps"], "batch_size": size["B"], "group_size": size["G"],
                      "seeds": size["S"]}}


def time_config(cfg: dict) -> tuple[float, int]:
    """Best-of-3 seconds of one compiled call and the updates per rollout batch."""
    import jax
    import jax.numpy as jnp

    import tabsim as ts
    from tabsim.sim.params import stack_hypers
    from tabsim.sim.rng import seed_words

    c = ts.resolve(cfg)
    train = ts.compiled_train(c)
    seeds = jnp.stack([seed_words(i) for i in range(c.train.seeds)])
    hp = stack_hypers([c.hyper_values()])
    jax.block_until_ready(train(seeds, hp))
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(train(seeds, hp))
        best = min(best, time.perf_counter() - t)
    return best, c.algo.epochs * c.algo.minibatches


def numpy_grpo_update(theta, prior, correct, rng, *, G, B, lr=0.8, beta=0.04, eps=0.2, std_eps=1e-4):
    """One ``grpo``-preset update on a logit table ``theta [N, K]`` (on policy: ratio 1, clip inactive)."""
    N, K = theta.shape
    idx = rng.permutation(N)[:B]
    logits = theta[idx]
    pi = np.exp(logits - logits.max(1, keepdims=True))
    pi /= pi.sum(1, keepdims=True)
    u = rng.random((B, G))
    ans = np.minimum((u[..., None] > np.cumsum(pi, 1)[:, None, :]).sum(-1), K - 1)
    r = np.take_along_axis(correct[idx], ans, 1).astype(float)
    grad = numpy_grpo_grad(logits, prior[idx], ans, r, beta=beta, eps=eps, std_eps=std_eps)
    theta[idx] -= lr * grad
    return theta


def numpy_grpo_grad(logits, logp_ref_table, ans, r, *, beta, eps, std_eps, logits_old=None):
    """Logit gradient ``[B, K]`` of the grpo preset's loss: clip surrogate + beta k3, mean over answers."""
    B, G = ans.shape
    K = logits.shape[1]
    logq = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    pi = np.exp(logq)
    logq_old = logq if logits_old is None else logits_old - np.log(np.exp(logits_old).sum(1, keepdims=True))
    mean = r.mean(1, keepdims=True)
    std = np.sqrt(((r - mean) ** 2).sum(1, keepdims=True) / (G - 1))
    adv = np.where(std > 0, (r - mean) / (std + std_eps), 0.0)
    logp = np.take_along_axis(logq, ans, 1)
    w = np.exp(logp - np.take_along_axis(logq_old, ans, 1))
    unclipped = -adv * w >= -adv * np.clip(w, 1 - eps, 1 + eps)
    d_logp = np.where(unclipped, -adv * w, 0.0)  # d surrogate / d logp
    l_ref = logp - np.take_along_axis(logp_ref_table, ans, 1)
    d_logp = d_logp + beta * (1.0 - np.exp(-l_ref))  # d k3 / d logp
    onehot = np.zeros((B, G, K))
    np.put_along_axis(onehot, ans[..., None], 1.0, -1)
    return (d_logp[..., None] * (onehot - pi[:, None, :])).sum(1) / (B * G)


def check_numpy_gradient(seed=0, B=8, G=8, K=8) -> float:
    """Max |NumPy - tabsim| of the grpo-preset logit gradient on one off-policy batch (float64)."""
    import jax
    import jax.numpy as jnp

    import tabsim as ts
    from tabsim.sim.algos import policy_loss
    from tabsim.runtime.run import algo_spec
    from tabsim.sim.params import Hyper

    rng = np.random.default_rng(seed)
    logits, old, ref = (rng.normal(size=(B, K)) for _ in range(3))
    ref = ref - np.log(np.exp(ref).sum(1, keepdims=True))
    ans = rng.integers(0, K, size=(B, G))
    r = (rng.random((B, G)) < 0.4).astype(float)
    want = numpy_grpo_grad(logits, ref, ans, r, beta=0.04, eps=0.2, std_eps=1e-4, logits_old=old)
    cfg = ts.resolve({"preset": "grpo"})
    spec = algo_spec(cfg)
    with jax.enable_x64(True):
        hp = Hyper(**cfg.hyper_values())
        tokens = jnp.asarray(ans)[..., None]
        mask = jnp.ones(tokens.shape)
        adv = ts.algos.advantages(spec, jnp.asarray(r), lengths=jnp.ones(r.shape), valid=jnp.ones(B), hp=hp)
        lq = lambda x: jnp.broadcast_to(jax.nn.log_softmax(x, -1)[:, None, None, :], (B, G, 1, K))  # noqa: E731
        logp_old = jnp.take_along_axis(lq(jnp.asarray(old))[..., 0, :], jnp.asarray(ans)[..., None], -1)
        f = lambda x: policy_loss(spec, lq(x), tokens, mask, adv, logp_old, lq(jnp.asarray(ref)), hp)[0]  # noqa: E731
        got = np.asarray(jax.grad(f)(jnp.asarray(logits)))
    return float(np.abs(got - want).max())


def numpy_timing(size: dict, updates: int) -> float:
    """Seconds per (seed x update) of the NumPy grpo update at the benchmark's size."""
    N, K, B, G = size["N"], 8, size["B"], size["G"]
    rng = np.random.default_rng(0)
    correct = np.zeros((N, K), bool)
    correct[:, :2] = True
    prior = np.log(np.full((N, K), 1.0 / K))
    theta = prior.copy()
    t = time.perf_counter()
    for _ in range(updates):
        theta = numpy_grpo_update(theta, prior, correct, rng, G=G, B=B)
    return (time.perf_counter() - t) / updates


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a check that it runs)")
    args = ap.parse_args(argv)
    from tabsim.config.presets import PRESETS

    size = (dict(N=64, B=16, G=8, S=4, steps=20) if args.quick else dict(N=512, B=128, G=16, S=16, steps=50))
    rows = {}
    for name in sorted(p for p in PRESETS if p != "paper") + ["paper"]:
        cfg = make_config(name, {}, size)
        if name == "paper":  # the reference simulator at the same size (its own composition)
            cfg["algo"] = {}
        rows[name] = time_config(cfg)
    for name, algo in REUSE.items():
        rows[name] = time_config(make_config("grpo", algo, size))
    base_s, _ = rows["grpo"]
    steps, S = size["steps"], size["S"]
    print(f"size: N={size['N']} K=8 B={size['B']} G={size['G']} seeds={S} steps={steps}, arm=true "
          f"(timings distorted by shared CPUs: rerun on a quiet machine)")
    print(f"{'preset':<18}{'upd/batch':>10}{'seconds':>10}{'updates_per_s':>15}{'rel_cost_per_update':>21}"
          f"{'batch_cost_over_updates':>25}")
    table = {}
    for name, (sec, upd) in rows.items():
        ups = S * steps * upd / sec
        rel = (sec / upd) / base_s
        over = sec / (upd * base_s)
        table[name] = {"updates_per_batch": upd, "seconds": round(sec, 5), "updates_per_s": round(ups, 1),
                       "rel_cost_per_update": round(rel, 3), "batch_cost_over_updates": round(over, 3)}
        print(f"{name:<18}{upd:>10}{sec:>10.4f}{ups:>15.1f}{rel:>21.3f}{over:>25.3f}")
    reuse = {k: v for k, v in table.items() if v["updates_per_batch"] > 1}
    ok = all(v["batch_cost_over_updates"] <= NOISE for v in reuse.values())
    print(f"reuse schedules cost no more than their extra updates (<= {NOISE:.2f}): {ok}")
    grad_err = check_numpy_gradient()
    np_upd = 4 if args.quick else 20
    np_s = numpy_timing(size, np_upd)
    tab_s = base_s / (S * steps)
    print(f"NumPy grpo update: {np_s * 1e3:.3f} ms per update per seed; tabsim grpo: {tab_s * 1e3:.4f} ms "
          f"-> speedup {np_s / tab_s:.1f}x; gradient max |NumPy - tabsim| = {grad_err:.2e}")
    print(json.dumps({"size": size, "presets": table, "reuse_within_updates": ok,
                      "numpy_seconds_per_update": np_s, "tabsim_grpo_seconds_per_update": tab_s,
                      "numpy_speedup": round(np_s / tab_s, 2), "numpy_grad_max_abs_err": grad_err,
                      "cpu_count": os.cpu_count()}))


if __name__ == "__main__":
    main()
