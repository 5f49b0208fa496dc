"""Exploratory companion of claim study B25 (not a hypothesis of the plan; writes exploratory.json).

GRPO's implicit per-step credit against the steps' true values, on the base policy of the study's tree (depth 3,
branching 3; STOP and token 1 in a frequent style of prior mass 0.9 and accuracy 0.1, token 2 in a rare style of
mass 0.1 and accuracy p_s = 0.6), in NumPy from the tree's prior (its task draw at seed 97100, apart from the
study's seeds). For each prompt: the exact value Q(a) = P(correct | first token a) of each root step and the
prompt's V = sum_a pi(a) Q(a) (the process step's true value against its parent's); then 20000 groups of G = 6
answers drawn from the prior, GRPO's z-score (Bessel std, eps 1e-4) and each root step's credit in the loss of
the lambda_grpo preset's aggregation (seq-mean-token-mean: answer i's token weighs 1 / (G |o_i|)):
GRPO ``sum_{i: a_i = a} A_i / (G |o_i|)``, lambda-GRPO the same divided by the step's process-set size
``n_a = #{i: a_i = a}`` (arXiv 2509.21154; tabsim.sim.algos.token_weights.lambda_grpo). The expected credit per
unit of true advantage, ``E[credit_a] / (Q(a) - V)``, is GRPO's implicit weight of step a: the paper's
frequency term. Printed and written per root step, averaged over the prompts.
"""
import json
from pathlib import Path

import numpy as np

from tabsim.sim import rng as R
from tabsim.sim.envs.tree import TreeEnv
from tabsim.sim.params import Hyper

SEED, PS, G, M, EPS = 97100, 0.6, 6, 20000, 1e-4
TREE = {"depth": 3, "branching": 3, "styles": [{"mass": 0.9, "accuracy": 0.1, "actions": [0, 1]},
                                               {"mass": 0.1, "actions": [2]}]}


def leaves(env, logits):
    """Per prompt: each terminal pair's probability, root step, length and answer (flat over the pairs)."""
    logq = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    n, b = logq.shape[0], env.branching
    reach = np.zeros(logq.shape[:2])
    for d in range(1, env.depth):
        lo, size = env.offsets[d], env.level_sizes[d]
        parent = env.offsets[d - 1] + np.arange(size) // (b - 1)
        token = 1 + np.arange(size) % (b - 1)
        reach[:, lo:lo + size] = reach[:, parent] + logq[:, parent, token]
    prob = (np.exp(reach[..., None] + logq) * env.terminal).reshape(n, -1)
    step = np.zeros((env.n_nodes, b), np.int64)  # the root step each pair descends from
    step[0] = np.arange(b)
    for d in range(1, env.depth):
        lo, size = env.offsets[d], env.level_sizes[d]
        step[lo:lo + size] = (1 + (np.arange(size) // (b - 1) ** (d - 1)) % (b - 1))[:, None]
    return prob, step.ravel(), env.pair_len.ravel(), env.pair_answer.ravel()


def main():
    env = TreeEnv(n_prompts=40, **TREE)
    task = env.init_task(R.seed_words(SEED), Hyper(prior_strength=PS))
    prob, step, length, answer = leaves(env, np.asarray(task.prior_logits, np.float64))
    correct = np.asarray(task.correct)
    gen = np.random.default_rng(SEED)
    b = env.branching
    rows = []
    for x in range(prob.shape[0]):
        p = prob[x] / prob[x].sum()
        r_leaf = correct[x, answer]
        pi = np.array([p[step == a].sum() for a in range(b)])
        q = np.array([(p * r_leaf)[step == a].sum() / pi[a] for a in range(b)])
        v = float((pi * q).sum())
        draw = gen.choice(p.size, size=(M, G), p=p)
        r, a, ln = r_leaf[draw], step[draw], length[draw]
        adv = (r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + EPS)
        per = adv / (G * ln)
        onehot = a[..., None] == np.arange(b)
        grpo = (per[..., None] * onehot).sum(1)  # [M, b]
        count = onehot.sum(1)
        lam = np.where(count > 0, grpo / np.maximum(count, 1), 0.0)
        rows.append({"pi": pi, "adv": q - v, "grpo": grpo.mean(0), "lam": lam.mean(0),
                     "drawn": (count > 0).mean(0)})
    out = []
    for a in range(b):
        keep = [rw for rw in rows if abs(rw["adv"][a]) > 0.02]  # a step whose value is the prompt's has no credit
        out.append({"root_step": a, "prompts": len(keep),
                    "prior_mass": float(np.mean([rw["pi"][a] for rw in rows])),
                    "chance_drawn_in_group": float(np.mean([rw["drawn"][a] for rw in rows])),
                    "true_advantage": float(np.mean([rw["adv"][a] for rw in rows])),
                    "grpo_credit_per_true_advantage": float(np.median([rw["grpo"][a] / rw["adv"][a] for rw in keep])),
                    "lambda_credit_per_true_advantage": float(np.median([rw["lam"][a] / rw["adv"][a]
                                                                         for rw in keep]))})
    Path(__file__).with_name("exploratory.json").write_text(json.dumps(
        {"seed": SEED, "prior_strength": PS, "group_size": G, "groups": M, "steps": out}, indent=2) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
