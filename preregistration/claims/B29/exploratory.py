"""Exploratory first look for claim B29 (before the plan; writes exploratory.json): the exact expected
first update of per-prompt (GRPO's group z-score) and batch-level (REINFORCE++'s batch whitening)
normalisation, each against the true gradient of the mean pass@1 (tabsim.sim.expected.direction), beside RLOO
and Dr. GRPO's group mean (no std).

The reference task's bandit (40 prompts, 8 answers, 2 correct, format boost 0.2) with a heterogeneous prior:
every prompt its own p_s ~ Beta(p_s c, (1 - p_s) c), c = 2 (very unequal prompts) and 20 (closer), mean p_s
0.2 and 0.5; the TRUE arm, G = 8, batch 16 of 40 prompts, SGD, one on-policy update, no KL (REINFORCE++'s k1
reward penalty is zero at the base anyway and the exact flow refuses a KL in the reward); five task draws
(seeds 90000-90004). The update is exact (an enumeration over each group's answer counts, and for the batch
statistic over the other groups of the batch), so a draw has no sampling noise: the draws differ in their
prompts' priors only. About 7 minutes on 2 shared cores (the batch statistic's enumeration in float64).
"""
import json
from pathlib import Path

import jax
import numpy as np

from tabsim.config import resolve
from tabsim.config.static import algo_spec, make_env, schedule
from tabsim.sim.expected import expected_update
from tabsim.sim.expected.direction import direction
from tabsim.sim.params import Hyper

SEEDS, FIRST = 5, 90000
RULES = {"grpo": "grpo", "reinforce_pp": "reinforce_pp", "rloo": "rloo", "dr_grpo": "dr_grpo"}
cells = []
for rule in RULES:
    for c in (2.0, 20.0):
        for p_s in (0.2, 0.5):
            cfg = resolve({"preset": "grpo", "task": {"heterogeneity": c, "prior_strength": p_s},
                           "algo": {"estimator": rule, "kl_placement": "none", "beta": 0.0},
                           "arms": {"arms": ["true"]}, "train": {"steps": 1, "dynamics": "expected"}})
            env, algo, sched = make_env(cfg), algo_spec(cfg), schedule(cfg)
            hp = Hyper(**cfg.hyper_values())
            out = []
            for s in range(FIRST, FIRST + SEEDS):
                task = env.init_task(jax.random.PRNGKey(s), hp)
                z = np.asarray(task.prior_logits)
                delta = np.asarray(expected_update(env, algo, sched, "true", task, z, hp, precision="float64")) - z
                out.append(direction(delta, z, np.asarray(task.correct)))
            cells.append({"estimator": rule, "heterogeneity": c, "prior_strength": p_s,
                          "cosine": [o["cosine"] for o in out], "scale_spread": [o["scale_spread"] for o in out],
                          "cosine_p_min": [float(np.nanmin(o["cosine_p"])) for o in out]})
            print(rule, c, p_s, np.round(cells[-1]["cosine"], 5), np.round(cells[-1]["scale_spread"], 3),
                  np.round(cells[-1]["cosine_p_min"], 6))
Path(__file__).with_name("exploratory.json").write_text(json.dumps(
    {"task_draws": SEEDS, "first_seed": FIRST, "cells": cells}, indent=2) + "\n")
