"""The exact share of correct answers that GRPO with the length penalty pushes down, at the base policy (writes
negative_share.json; reported beside the plan's test, not tested).

For one answer ``i`` of a group of ``G`` on-policy answers, GRPO's advantage ``(r_i - mean r) / (std r + eps)`` is
negative iff ``(G - 1) r_i < sum_{j != i} r_j`` (the std only scales it). With the plan's reward ``r = c + R(L)``
(``c`` the 0/1 correctness, ``R`` DAPO's overlong penalty at L_max 4, L_cache 2: 0, 0, -0.5, -1 at 1 to 4 tokens),
the other answers' rewards are ``G - 1`` independent draws from the policy's distribution over (correctness,
length), so for each prompt

    P(c_i = 1, A_i < 0) = sum_L P(c = 1, L) P(sum of G - 1 draws > (G - 1) (1 + R(L)))

exactly, by convolving the reward distribution (its values are multiples of 0.5). The share reported is
``sum_prompts P(c = 1, A < 0) / sum_prompts P(c = 1)``, per seed's task, at the base policy (the tree's prior),
on the pilot's and the confirmatory seeds. Without the penalty a correct answer's reward 1 is the group's maximum
(``A >= 0``); under DRPO every positive weighs ``softmax((1 - L / L_max) / lambda) > 0`` over its group's positives
(tabsim.sim.algos.drpo.positive_weights): both shares are 0 by construction.
"""
import json
from pathlib import Path

import jax
import numpy as np

from tabsim.config import resolve
from tabsim.config.static import make_env
from tabsim.prereg.schema import load_plan
from tabsim.sim import rng as R
from tabsim.sim.params import Hyper
from tabsim.sim.rewards import overlong_penalty

plan, _ = load_plan(Path(__file__).with_name("plan.yaml"))
d = plan.design
G = 8  # the drpo preset's answers per prompt
cfg = resolve({"preset": d.preset, **d.config, "train": {"group_size": G}})
env = make_env(cfg)
a = cfg.algo
R_L = np.asarray(overlong_penalty(np.arange(1, env.depth + 1, dtype=np.float32), a.overlong_max, a.overlong_cache))
R_L = a.overlong_factor * R_L  # by length 1 .. D


def share(seed: int, p_s: float) -> tuple[float, float]:
    """``(share of correct answers with A < 0, P(correct))`` of seed ``seed``'s task at its base policy."""
    hp = Hyper(**{**{k: np.float32(v) for k, v in cfg.hyper_values().items()}, "prior_strength": np.float32(p_s)})
    task = env.init_task(R.seed_words(seed), hp)
    logq = jax.nn.log_softmax(task.prior_logits, axis=-1)
    leaf = np.asarray(np.exp(np.asarray(env._reach(logq))[..., None] + np.asarray(logq)) * env.terminal)  # [N, n, b]
    correct = np.asarray(task.correct)[:, env.pair_answer]  # [N, n, b]
    length = np.broadcast_to(env.pair_len, leaf.shape)
    num = den = 0.0
    for n in range(leaf.shape[0]):
        # the reward distribution over half-unit values: index v <-> reward (v - 4) / 2 in [-2, 2]
        dist = np.zeros(9)
        pc = np.zeros(env.depth)  # P(c = 1, L)
        for L in range(1, env.depth + 1):
            at = length[n] == L
            p1 = float((leaf[n] * correct[n] * at).sum())
            p0 = float((leaf[n] * (1 - correct[n]) * at).sum())
            pc[L - 1] = p1
            dist[int(round(2 * (1 + R_L[L - 1]))) + 4] += p1
            dist[int(round(2 * R_L[L - 1])) + 4] += p0
        total = np.array([1.0])  # the sum of G - 1 draws, in half units offset by 4 (G - 1)
        for _ in range(G - 1):
            total = np.convolve(total, dist)
        sums = (np.arange(total.size) - 4 * (G - 1)) / 2.0
        for L in range(1, env.depth + 1):
            num += pc[L - 1] * float(total[sums > (G - 1) * (1 + R_L[L - 1])].sum())
        den += pc.sum()
    return num / den, den / leaf.shape[0]


rows = []
for seeds, label in ((range(93500, 93508), "pilot"), (range(d.first_seed, d.first_seed + d.seeds), "confirmatory")):
    for ps in (0.2, 0.5):
        vals = [share(s, ps) for s in seeds]
        rows.append({"seeds": label, "first_seed": seeds[0], "prior_strength": ps,
                     "grpo_lp_negative_share_mean": float(np.mean([v[0] for v in vals])),
                     "grpo_lp_negative_share_min": float(np.min([v[0] for v in vals])),
                     "grpo_lp_negative_share_max": float(np.max([v[0] for v in vals])),
                     "base_pass1": float(np.mean([v[1] for v in vals])),
                     "grpo_negative_share": 0.0, "drpo_negative_share": 0.0})
out = {"group_size": G, "overlong_by_length": [float(x) for x in R_L], "rows": rows}
Path(__file__).with_name("negative_share.json").write_text(json.dumps(out, indent=2) + "\n")
print(json.dumps(out, indent=1))
