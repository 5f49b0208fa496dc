"""Named presets: particular compositions of the GRPO family (and, for ``paper``, a whole study).

A preset is a partial config; a config that names it overrides any of its values. The TRL and verl
settings that give the same update are in ``docs/presets.md``.
"""
from __future__ import annotations

PAPER = {
    "task": {"env": "bandit", "n_prompts": 40, "n_answers": 8, "n_correct": 2, "format_boost": 0.2},
    "arms": {"arms": ["frozen", "random", "majority", "true"], "gamma": 0.5, "tie": "lowest", "offline_samples": 64},
    "algo": {"estimator": "grpo", "std_ddof": 0, "std_eps": 1e-8, "ratio": "token", "surrogate": "reinforce",
             "aggregation": "group-sum", "kl": "ref_ce", "kl_placement": "loss", "beta": 0.01, "lr": 0.05,
             "filter": True, "optimizer": "sgd", "epochs": 1, "minibatches": 1},
    "train": {"steps": 200, "batch_size": 16, "group_size": 8, "seeds": 8, "replacement": False},
}

PRESETS: dict[str, dict] = {
    # The reference simulator of arXiv 2606.05932 (SPEC §3).
    "paper": PAPER,
    # DeepSeekMath GRPO: z-score (Bessel std as in TRL), PPO clip 0.2, seq-mean-token-mean, k3 KL in loss.
    "grpo": {"algo": {"estimator": "grpo", "std_ddof": 1, "std_eps": 1e-4, "surrogate": "clip",
                      "eps_low": 0.2, "eps_high": 0.2, "aggregation": "seq-mean-token-mean",
                      "kl": "k3", "kl_placement": "loss", "beta": 0.04}},
}
