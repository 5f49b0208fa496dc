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

# Learning rate of the GRPO-family presets. Their losses are means over the batch's answers, so a
# prompt's logits get 1/B of what the reference simulator's summed update gives them; 0.8 = 0.05 x 16
# gives the same step per kept prompt at the reference batch of 16 prompts (SGD on the logit table).
PRESET_LR = 0.8


def _algo(**kw) -> dict:
    """An ``algo`` section: on-policy SGD with no KL, no filter, one update per batch, unless set."""
    base = {"estimator": "grpo", "std_ddof": 1, "std_eps": 1e-6, "ratio": "token", "surrogate": "clip",
            "eps_low": 0.2, "eps_high": 0.2, "aggregation": "token-mean", "kl": "k3", "kl_placement": "none",
            "beta": 0.0, "filter": False, "epochs": 1, "minibatches": 1, "optimizer": "sgd", "lr": PRESET_LR}
    return {**base, **kw}


# TRL's GRPO (the ``grpo`` preset's settings), shared by the presets that change only its sampling
_GRPO = dict(std_eps=1e-4, aggregation="seq-mean-token-mean", kl="k3", kl_placement="loss", beta=0.04)

PRESETS: dict[str, dict] = {
    # The reference simulator of arXiv 2606.05932 (docs/science.md, the reference simulator).
    "paper": PAPER,
    # DeepSeekMath GRPO (arXiv 2402.03300) as TRL loss_type="grpo": z-score with the Bessel std and
    # eps 1e-4, PPO clip 0.2, seq-mean-token-mean, k3 KL in the loss (beta 0.04).
    "grpo": {"algo": _algo(**_GRPO)},
    # Dr. GRPO (arXiv 2503.20783): no std, token sum over a constant (answers x max length), no KL.
    "dr_grpo": {"algo": _algo(estimator="dr_grpo", aggregation="seq-mean-token-sum-norm")},
    # DAPO (arXiv 2503.14476): clip-higher 0.2/0.28, token-mean, dynamic-sampling filter, no KL;
    # the group z-score of verl (unbiased std, eps 1e-6), in which its recipe runs.
    "dapo": {"algo": _algo(eps_high=0.28, aggregation="token-mean", filter=True)},
    # GSPO (arXiv 2507.18071): one length-normalised ratio per answer clipped at 3e-4/4e-4,
    # seq-mean-token-mean, no KL.
    "gspo": {"algo": _algo(ratio="sequence", eps_low=3e-4, eps_high=4e-4, aggregation="seq-mean-token-mean")},
    # RLOO as TRL's RLOOTrainer (arXiv 2402.14740): leave-one-out baseline, one full-likelihood ratio
    # per answer clipped at 0.2, mean over answers, k1 KL subtracted from the reward (beta 0.05).
    "rloo": {"algo": _algo(estimator="rloo", ratio="sequence-sum", aggregation="seq-mean-token-mean",
                           kl="k1", kl_placement="reward", beta=0.05)},
    # REINFORCE++ (arXiv 2501.03262) as verl reinforce_plus_plus: batch-whitened return, PPO clip 0.2,
    # token-mean, k1 KL in the reward (beta 0.01).
    "reinforce_pp": {"algo": _algo(estimator="reinforce_pp", kl="k1", kl_placement="reward", beta=0.01)},
    # CISPO (MiniMax-M1, arXiv 2506.13585): detached importance weight capped at 1 + 4 = 5 with no lower
    # bound (eps_low 1 puts it at 0), every token keeps its gradient; token-mean, no KL.
    "cispo": {"algo": _algo(surrogate="cispo", eps_low=1.0, eps_high=4.0)},
    # SAPO (arXiv 2511.20347): soft sigmoid gate, tau 1.0 (A > 0) / 1.05 (A <= 0), seq-mean-token-mean.
    "sapo": {"algo": _algo(surrogate="sapo", sapo_tau_pos=1.0, sapo_tau_neg=1.05,
                           aggregation="seq-mean-token-mean")},
    # GPG (arXiv 2504.02546): -A logp with no ratio, no clip, no KL; its batch-rescaled group baseline.
    "gpg": {"algo": _algo(estimator="gpg", surrogate="reinforce")},
    # GMPO (arXiv 2507.20673): the geometric mean of each answer's token ratios, each clipped in log space on
    # its advantage's side to (e^-0.4, e^0.4), times A; mean over answers; group z-score, no KL.
    "gmpo": {"algo": _algo(surrogate="gmpo", eps_low=0.4, eps_high=0.4, aggregation="seq-mean-token-mean")},
    # Lite PPO (arXiv 2508.08221): group-mean, batch-std advantage (TRL scale_rewards="batch": Bessel std,
    # eps 1e-4) and token-level aggregation over the batch; PPO clip 0.2, no KL.
    "lite_ppo": {"algo": _algo(estimator="batch_std", std_eps=1e-4, aggregation="token-mean")},
    # MAPO (arXiv 2509.18849) as its authors' released recipe: the certainty-weighted mixed advantage (Bessel
    # std, eps 1e-6), clip 0.2/0.3 with the dual clip (c = 3), token-mean, low_var_kl in the loss (beta 0.01).
    "mapo": {"algo": _algo(estimator="mapo", surrogate="dual_clip", eps_high=0.3, dual_clip_c=3.0,
                           kl="low_var_kl", kl_placement="loss", beta=0.01)},
    # 2-GRPO ("It Takes Two: Your GRPO Is Secretly DPO", arXiv 2510.00977): the grpo preset with two answers per
    # prompt; a discordant pair of 0/1 rewards gets a DPO-like
    # contrast +-0.5 / (1/sqrt(2) + eps), about +-0.707, an equal pair 0.
    "2_grpo": {"algo": _algo(**_GRPO), "train": {"group_size": 2}},
    # Simple Policy Optimization (arXiv 2401.16025): its quadratic pull back to the trust region (eps 0.2) in
    # place of the clip, mean over tokens, no KL; the paper's critic (GAE) becomes the group z-score.
    "spo": {"algo": _algo(surrogate="spo", aggregation="token-mean")},
    # LUSPO (arXiv 2602.05261) as TRL loss_type="luspo": GSPO's clipped sequence ratio with each answer's loss
    # scaled by its length (the sum over its tokens of the broadcast loss), mean over answers; clip 2e-3/2.5e-3
    # (the paper's section 5.1, TRL's paper index), TRL's z-score (eps 1e-4), no KL.
    "luspo": {"algo": _algo(std_eps=1e-4, ratio="sequence", eps_low=2e-3, eps_high=2.5e-3,
                            aggregation="seq-mean-token-sum")},
    # INTELLECT-2 (arXiv 2505.07291) as TRL's paper-index setting: two-sided clipping delta = 4 (for A < 0 the
    # ratio is capped at 4, the dual clip with c = 4), eps 0.2, k3 KL in the loss (beta 0.001), TRL's default
    # loss_type "dapo" (token-mean) and z-score (eps 1e-4), 16 answers per prompt.
    "intellect_2": {"algo": _algo(std_eps=1e-4, surrogate="dual_clip", dual_clip_c=4.0, kl="k3", kl_placement="loss",
                                  beta=0.001),
                    "train": {"group_size": 16}},
    # NGRPO (arXiv 2509.18851) as its authors' released run (train_qwen2.5-math-7b_ngrpo.sh): advantage calibration
    # (one virtual sample of reward 1 in every group's mean and Bessel std, eps 1e-6), asymmetric clip 0.16 (A < 0) /
    # 0.24 (A > 0), verl's token-mean, no KL. Their filter drops only all-right groups (whose NGRPO advantage is 0
    # anyway); tabsim's filter would also drop the all-wrong groups NGRPO exists for, so it stays off here.
    "ngrpo": {"algo": _algo(estimator="ngrpo", eps_low=0.16, eps_high=0.24, aggregation="token-mean")},
    # RAFT++ ("A Minimalist Approach to LLM Reasoning", arXiv 2504.11343) as its authors' run_raftpp.sh: A = max(r, 0)
    # (rewarded answers only), PPO clip 0.2 (their dual clip c = 3 acts only where A < 0: never here), verl token-mean
    # over every answer's tokens, low_var_kl in the loss 0.001, 4 answers per prompt.
    "raft": {"algo": _algo(estimator="raft", aggregation="token-mean", kl="low_var_kl", kl_placement="loss",
                           beta=0.001),
             "train": {"group_size": 4}},
    # Reinforce-Rej (arXiv 2504.11343, run_reinforce_rej.sh): the raw reward as the advantage in the paper's +-1
    # encoding (A = 2r - 1, the sign estimator) on the groups with both outcomes (the all-right and all-wrong groups
    # dropped: filter), no baseline or std; their loss otherwise as raft's (dual clip c = 3, eps 0.2, token-mean,
    # low_var_kl 0.001, 4 answers).
    "reinforce_rej": {"algo": _algo(estimator="sign", filter=True, surrogate="dual_clip", dual_clip_c=3.0,
                                    aggregation="token-mean", kl="low_var_kl", kl_placement="loss", beta=0.001),
                      "train": {"group_size": 4}},
    # AsymRE (arXiv 2506.20520): REINFORCE with no ratio or clip, A = r - (mean_g + delta), delta = -0.1 (the default
    # of arXiv 2509.24203's implementation, Trinity-RFT's asymre), token-mean, no KL. The paper's point is
    # off-policy data: sweep algo.epochs / algo.minibatches to make it so.
    "asymre": {"algo": _algo(estimator="asymre", baseline_shift=-0.1, surrogate="reinforce", aggregation="token-mean")},
    # PVPO (arXiv 2508.21104): A = r - V_ref(x), the reference policy's success rate on the prompt (exact from the
    # task's prior, never refreshed), with the group z-score's PPO clip 0.2, token-mean, no KL; the paper's data
    # filtering by that rate is not part of it.
    "pvpo": {"algo": _algo(estimator="pvpo", aggregation="token-mean")},
    # GRPO-LEAD (arXiv 2504.09696) as its authors' released run (ds_14b_stage1.sh on their verl): the z-score (Bessel
    # std, eps 1e-6) times the logistic difficulty weight of the group's correct ratio, PPO clip 0.2, verl's
    # token-mean, no KL (kl_loss_coef 0), 8 answers. Its length-dependent reward and -1 for a wrong answer are
    # rewards, not part of this update (on 0/1 rewards the -1 changes no z-score).
    "grpo_lead": {"algo": _algo(estimator="grpo_lead", aggregation="token-mean")},
    # EDGE-GRPO (arXiv 2507.21848) as its authors' train_grpo.sh on their TRL fork: the entropy-driven advantage (TRL's
    # z-score, Bessel std, eps 1e-4, divided by the answer's mean entropy and multiplied by the batch's), clip 0.2,
    # TRL's bnpo at one answer per device (= seq-mean-token-mean), no KL, 8 answers. Its guided error correction
    # (injecting a correct answer into all-wrong groups) is not part of it.
    "edge_grpo": {"algo": _algo(estimator="edge", std_eps=1e-4, aggregation="seq-mean-token-mean")},
    # S-GRPO (arXiv 2508.05928) as its authors' Qwen2.5-Math-7B script on Oat (critic_type drgrpo): the z-score (Bessel
    # std, eps 1e-8) times the noise-aware weight w*(G, k, p) with p = 0.1, Dr. GRPO's sum over tokens by a constant
    # (seq-mean-token-sum-norm), PPO clip 0.2, no KL, 8 answers.
    "s_grpo": {"algo": _algo(estimator="s_grpo", std_eps=1e-8, sgrpo_noise=0.1, aggregation="seq-mean-token-sum-norm")},
    # GVPO (arXiv 2504.19599) as its authors' released run (GVPO/run_qwen2-7b_math_gvpo.sh): A = r - mean_g r (verl's
    # grpo advantage without the std), the loss (1/2)((s_i - mean_g s) - A_i)^2 with s_i = 0.1 sum_t log(pi / pi_old),
    # 4 answers per prompt, no KL; the mean over the batch's answers (the released sum / (G - 1) up to a constant).
    "gvpo": {"algo": _algo(estimator="dr_grpo", surrogate="gvpo", gvpo_beta=0.1, aggregation="seq-mean-token-mean"),
             "train": {"group_size": 4}},
    # KL-Cov (arXiv 2505.22617) as its authors' released 7B recipe (recipe/dapo/7b_kl_cov.sh: k_percent 0.2, i.e.
    # 0.2% of the tokens, ppo_kl_coef 1): -A w unclipped, plus |log w| on the 0.2% of the batch's tokens with the
    # largest (A - mean A)(logp - mean logp) (at least one), verl's group z-score, token-mean, their DAPO filter of
    # groups without spread, 8 answers, no KL.
    "kl_cov": {"algo": _algo(surrogate="kl_cov", kl_cov_ratio=0.002, kl_cov_coef=1.0, aggregation="token-mean",
                             filter=True),
               "train": {"group_size": 8}},
    # GFPO (Group Filtered Policy Optimization, arXiv 2508.09726) as TRL's experimental GFPOTrainer over its GRPO
    # defaults (z-score with the Bessel std, eps 1e-4; clip 0.2; loss_type "dapo", token-mean; no KL): sample G' = 16
    # answers, keep the k = 8 shortest and compute the advantages over them (tabsim.sim.groups). G' = 16, k = 8 are
    # tabsim's illustration of "sample more" (the paper varies both).
    "gfpo": {"algo": _algo(std_eps=1e-4, aggregation="token-mean"),
             "train": {"group_size": 16, "group_stage": "gfpo_length", "group_keep": 8}},
    # CPPO (Completion Pruning Policy Optimization, arXiv 2503.22342) as its authors' released GSM8K run
    # (scripts/CPPO_gsm.sh, recipes/gsm8k): 16 answers, pruning rate 0.5 (each group keeps the k = 8 of largest |A|,
    # the advantages taken over all 16 first), z-score with the Bessel std and eps 1e-4, clip 0.2, token-mean, k3
    # KL in the loss (beta 0.04).
    "cppo": {"algo": _algo(std_eps=1e-4, aggregation="token-mean", kl="k3", kl_placement="loss", beta=0.04),
             "train": {"group_size": 16, "group_stage": "cppo", "group_keep": 8}},
    # SPO (Single-stream Policy Optimization, arXiv 2509.13232) as its authors' released recipe (verl-recipe spo):
    # the Beta value tracker's baseline (rho 0.875) normalised over the batch, prompts drawn by sqrt(p (1 - p)) + 0.05,
    # clip 0.2/0.28 with verl's dual clip c = 10, token-mean, no KL; 2 answers per prompt (tabsim's fewest: SPO
    # draws 1; the tracker takes the last answer's reward).
    "spo_stream": {"algo": _algo(surrogate="dual_clip", eps_high=0.28, dual_clip_c=10.0, tracker="spo_stream",
                                 tracker_rho=0.875),
                   "train": {"group_size": 2}},
    # BNPO (Beta Normalization Policy Optimization, arXiv 2506.02864) as its authors' released recipe (recipe/bnpo
    # run.sh): the group-mean baseline over a Beta density fitted to the batch's group means, clip 0.2/0.28 with
    # verl's dual clip c = 10, seq-mean-token-sum, no KL, 16 answers per prompt.
    "bnpo": {"algo": _algo(estimator="bnpo", surrogate="dual_clip", eps_high=0.28, dual_clip_c=10.0,
                           aggregation="seq-mean-token-sum"),
             "train": {"group_size": 16}},
    # DisCO (arXiv 2505.12366) as its authors' released 1.5B recipe (scripts/train/run_disco_logL_1.5b_8k.sh): the
    # log-likelihood score with the log-mean-exp over the negatives (tau 10), the KL constraint delta 1e-4 as a
    # squared hinge of weight beta 1e3 (ppo_kl_type kl), the positives and negatives from verl's grpo advantage's sign,
    # no clip, no reference KL, no filter, 8 answers.
    "disco": {"algo": _algo(surrogate="disco", disco_tau=10.0, disco_delta=1e-4, disco_beta=1e3,
                            aggregation="token-mean"),
              "train": {"group_size": 8}},
    # DAPO (arXiv 2503.14476) with its soft overlong punishment (eq. 13) added to the reward: the dapo preset's update
    # and R(L) = 0 up to L_max - L_cache tokens, a linear ramp to -1 at L_max (tabsim.sim.rewards). The paper's
    # 20480/4096 tokens have no tabular counterpart: here L_max = 4 (the default tree's depth) and L_cache = 2, so
    # answers of 3 and 4 tokens lose 0.5 and 1 (a bandit's one-token answers lose nothing).
    "dapo_overlong": {"algo": _algo(eps_high=0.28, aggregation="token-mean", filter=True, reward_terms=["overlong"],
                                    overlong_max=4.0, overlong_cache=2.0, overlong_factor=1.0)},
    # Unlikeliness reward ("Rewarding the Unlikely", arXiv 2506.02355) as its authors' released GRPO run
    # (examples/lean/grpo.sh): r (1 - 0.25 rank/G) by the rollout policy's likelihood rank in the group, 32 answers
    # per prompt, 2 passes over each batch (ppo_epochs, the paper's second fix of the rank bias), z-score with the
    # Bessel std and eps 1e-6, clip 0.2, token-level loss, low_var_kl in the loss (0.1), groups without spread
    # dropped (advantage_threshold). Their global-norm clip (1.0) and learning rate are not carried over.
    "unlikeliness": {"algo": _algo(reward_terms=["unlikeliness"], rank_penalty=0.25, epochs=2, filter=True,
                                   aggregation="token-mean", kl="low_var_kl", kl_placement="loss", beta=0.1),
                     "train": {"group_size": 32}},
    # Intuitor (arXiv 2505.19590): GRPO on the model's self-certainty in place of the verifier's reward (the
    # self_certainty arm, beside frozen, random and true for the partition) with its released verl recipe's update
    # (math_intuitor.sh: low_var_kl in the loss 0.005, 8 answers, verl's token-mean and clip 0.2, no entropy bonus).
    "intuitor": {"arms": {"arms": ["frozen", "random", "self_certainty", "true"]},
                 "algo": _algo(aggregation="token-mean", kl="low_var_kl", kl_placement="loss", beta=0.005)},
    # "Beyond the 80/20 Rule" (arXiv 2506.01939): the DAPO update (the dapo preset's composition) with the policy
    # gradient kept on the top 20% of the batch's tokens by the policy's entropy, TRL's top_entropy_quantile = 0.2
    # (its threshold rule: tabsim.sim.algos.token_weights.top_entropy).
    "top_entropy": {"algo": _algo(eps_high=0.28, aggregation="token-mean", filter=True, token_weight="top_entropy",
                                  top_entropy_quantile=0.2)},
    # Balanced Aggregation (arXiv 2605.04077): GRPO's loss reduced per group as each sign's token mean weighted by
    # its share of the answers, then averaged over the groups (the aggregation "balanced"). The rest of the paper's
    # recipe was not read: verl's group z-score, PPO clip 0.2, no KL here.
    "balanced_aggregation": {"algo": _algo(aggregation="balanced")},
    # DCPO (arXiv 2509.02333) as its authors' released run (recipe/dcpo/run_dcpo.sh): the clip bounds set by each
    # token's rollout probability (eps 0.2 / 0.28, clip_type dynamic) with the dual clip c = 10, no KL, no filter;
    # their only-token-mean (each response's token mean, summed over a micro-batch) as seq-mean-token-mean. Their
    # smooth advantage standardisation (statistics over the steps so far) is not here: the group z-score stands in.
    "dcpo": {"algo": _algo(surrogate="dcpo", eps_low=0.2, eps_high=0.28, dual_clip_c=10.0,
                           aggregation="seq-mean-token-mean")},
    # REAL (Rewards as Labels, arXiv 2602.05630) as its authors' released 1.5B run (scripts/train/1.5b_real.sh): each
    # answer's mean token log-ratio a logit (tau 0.5), positives labelled 1 and negatives 0 against an anchor logit 0,
    # summed over groups / B; the classes from verl's grpo advantage's sign, no clip, no KL, no filter, 8 answers.
    "real": {"algo": _algo(surrogate="real", real_tau=0.5, aggregation="token-mean"), "train": {"group_size": 8}},
    # CTPO-LA (arXiv 2605.07331) as its authors' released ctpo.sh: the cumulative token ratio (the prefix's product,
    # the gradient through the current token), clipped in log space to [-0.025, 0.05] t^0.5 at position t with the dual
    # clip exp(0.05 t^0.5) for A < 0; verl's grpo advantage and token-mean, no KL, 8 answers.
    "ctpo": {"algo": _algo(ratio="cumulative", surrogate="ctpo", ctpo_clip_low=0.025, ctpo_clip_high=0.05,
                           ctpo_clip_c=0.05, ctpo_power=0.5, aggregation="token-mean"),
             "train": {"group_size": 8}},
    # HölderPO (arXiv 2605.12058) as its authors' released trainer (train_zero_math_holder.py, critic_type_modify
    # "holder"; scripts/qwen2.5-math-7b-holder.sh): one ratio per answer, the power mean of its token ratios with
    # exponent p, PPO's clip 0.2 on it, the mean over answers; oat's grpo advantage (Bessel std, eps 1e-8), no KL,
    # 8 answers. p = 1 is their trainer's constant default; their script anneals p from 2 to -2 over 500 steps
    # (linear_dec), which is not built: sweep algo.holder_p for fixed exponents.
    "holderpo": {"algo": _algo(ratio="holder", holder_p=1.0, std_eps=1e-8, aggregation="seq-mean-token-mean"),
                 "train": {"group_size": 8}},
    # Clip-Cov (arXiv 2505.22617) as verl's recipe/entropy/7b_clip_cov.sh: loss_mode clip_cov (PPO's clip with
    # clip_ratio_low = clip_ratio_high = 1, the gradient cut on max(1, floor(0.0002 n)) tokens drawn at random among
    # those with covariance in (1, 5)), verl's grpo advantage, token-mean, dynamic-sampling filter, no KL, 8 answers.
    "clip_cov": {"algo": _algo(surrogate="clip_cov", eps_low=1.0, eps_high=1.0, clip_cov_ratio=2e-4, clip_cov_lb=1.0,
                               clip_cov_ub=5.0, aggregation="token-mean", filter=True),
                 "train": {"group_size": 8}},
    # The spurious-rewards recipe (arXiv 2506.10947; docs/science.md): 8 sequential clipped (0.2) updates per
    # rollout batch, no KL, z-score with the unbiased std, 16 samples per prompt, the study's arms.
    # Each prompt owns its logits here, so the recipe's 8 minibatches (which move every prompt through
    # the shared weights) become 8 passes over the whole batch: split over groups, each group would be
    # updated once, on-policy, and the clip would never fire.
    # GiGPO (Group-in-Group Policy Optimization, arXiv 2505.10978) as the authors' verl-agent ALFWorld script
    # (examples/gigpo_trainer/run_alfworld.sh): mode "mean_std_norm" (estimator gigpo_std: the episode z-score plus, on
    # each token, the z-score against the group's answers in the same tree state, tabsim.sim.algos.tree_credit),
    # step_advantage_w 1, low_var_kl in the loss (0.01), clip 0.2, token-mean, 8 answers. Its gamma = 0.95 discounts
    # per environment turn; here a step is a token and the return is undiscounted.
    "gigpo": {"algo": _algo(estimator="gigpo_std", kl="low_var_kl", kl_placement="loss", beta=0.01),
              "train": {"group_size": 8}},
    # TEMPO (arXiv 2509.18314) as its authors' released MATH script (train_math_tempo.sh): adv_estimator tempo (GRPO's
    # z-score, Bessel std, eps 1e-6, plus the prefix tree's TD corrections, tabsim.sim.algos.tree_credit), 7 answers,
    # clip 0.2/0.28, token-mean, no KL, no entropy bonus; the script's 8 minibatches per batch are not modelled.
    "tempo": {"algo": _algo(estimator="tempo", eps_high=0.28), "train": {"group_size": 7}},
    # lambda-GRPO (arXiv 2509.21154) as its authors' released trainer and defaults (github.com/coli-saar/grpo-prm at
    # 6bc58b1: train_utils.default_args, lambda_grpo/trainer.py): GRPO's z-score (Bessel std, eps 1e-4), clip 0.2, one
    # update per batch, loss_type "grpo" (seq-mean-token-mean), beta 0, 6 answers, each token's loss scaled by 1 / the
    # number of the group's answers sharing its prefix (tabsim.sim.algos.token_weights.lambda_grpo).
    "lambda_grpo": {"algo": _algo(std_eps=1e-4, aggregation="seq-mean-token-mean", token_weight="lambda_grpo"),
                    "train": {"group_size": 6}},
    # GRESO (arXiv 2506.02177) as its authors' released scripts (Infini-AI-Lab/GRESO, train-scripts/*_greso.sh, on
    # their verl's defaults): the probabilistic pre-rollout skip (algo.prompt_skip, tabsim.sim.prompt_skip) with
    # p_easy = p_hard = 0.5 and a target zero-variance share of 0.25, on dynamic sampling (the zero-variance groups
    # dropped: algo.filter; train.refill adds the draw beyond the batch), GRPO's z-score (Bessel std, eps 1e-6), clip
    # 0.2, token-mean, no KL, entropy bonus 0.001 (their verl's entropy_coeff), 8 answers per prompt.
    "greso": {"algo": _algo(filter=True, ent_coef=0.001, prompt_skip="greso", skip_p_easy=0.5, skip_p_hard=0.5,
                            skip_target=0.25),
              "train": {"group_size": 8}},
    # DRPO (arXiv 2510.04474) as its authors' released 1.5B recipe (github.com/Optimization-AI/DRPO,
    # scripts/train/run_drpo_1.5b_8k.sh: loss_type drpo, Lambda 0.1, tau 10, delta 1e-4, beta 1e3, ppo_kl_type kl, no
    # clip, no reference KL, no filter, 8 answers): DisCO's objective with each positive weighted by exp((1 - length /
    # max length) / 0.1) normalised over its group's positives (tabsim.sim.algos.drpo); the recipe's 4 minibatches per
    # batch are not modelled (as disco's).
    "drpo": {"algo": _algo(surrogate="drpo", drpo_lambda=0.1, disco_tau=10.0, disco_delta=1e-4, disco_beta=1e3,
                           aggregation="token-mean"),
             "train": {"group_size": 8}},
    # REC (arXiv 2509.24203) as the authors' Trinity-RFT example examples/rec_gsm8k (README, gsm8k.yaml) and loss
    # (trinity/algorithm/policy_loss_fn/rec_policy_loss.py): group-relative REINFORCE (the group-mean baseline, no std:
    # std_normalize false), the clip kept as a one-side mask, epsilon 0.2 / 0.2, token-mean (their masked mean), no
    # KL, 8 answers (repeat_times). REC-OneSide-NoIS drops the importance weight (tabsim.sim.algos.rec); REC-OneSide-IS
    # keeps it, whose gradient is the PPO clip's. Their runs lag the sampler by sync_interval / sync_offset updates
    # (here algo.behaviour = stale, behaviour_lag) with old_logprob the rollout's (algo.behaviour_old = behaviour).
    "rec_oneside_nois": {"algo": _algo(estimator="dr_grpo", surrogate="rec_oneside_nois", aggregation="token-mean"),
                         "train": {"group_size": 8}},
    "rec_oneside_is": {"algo": _algo(estimator="dr_grpo", surrogate="clip", aggregation="token-mean"),
                       "train": {"group_size": 8}},
    # Knapsack RL (arXiv 2509.25849) as its authors' released script (liziniu/KnapsackRL,
    # examples/knapsack_trainer/run_knapsack_grpo_7b.sh): answers per prompt by the knapsack allocation
    # (algo.allocation, tabsim.sim.allocation) at the budget of 8 a prompt, at most 128 (their MAX_N), min_n 2; GRPO's
    # z-score (verl: Bessel std, eps 1e-6), clip 0.2/0.28, token-mean, no KL. Their adv_clip_value 5 is not built.
    "knapsack_rl": {"algo": _algo(eps_high=0.28, allocation="knapsack", allocation_max=128), "train": {"group_size": 8}},
    # VAS (MMR1, arXiv 2509.21268) as the authors' released config (LengSicong/MMR1, examples/mmr1.yaml, on their
    # EasyR1 trainer's defaults): the variance half of variance-aware sampling (algo.curriculum, tabsim.sim.vas):
    # every 4 steps each prompt rolled out 8 times, its p(1 - p) min-max scaled, momentum 0, half of each batch drawn by
    # those weights; GRPO's z-score (Bessel std, eps 1e-6), clip 0.2/0.2, token-mean, the low-variance KL in the loss
    # at 0.01, 8 answers per prompt. Their gradient-norm clip 1.0 is not set (as for the other presets).
    "vas": {"algo": _algo(kl="low_var_kl", kl_placement="loss", beta=0.01, curriculum="vas", vas_ratio=0.5,
                          vas_momentum=0.0, vas_every=4, vas_rollouts=8),
            "train": {"group_size": 8}},
    # PPO (arXiv 1707.06347) with verl's gae advantage estimator (algorithm.adv_estimator=gae, gamma = lam = 1: the
    # terminal reward's advantage R - V(s_t), whitened over the batch's tokens) and a tabular critic learned by
    # Monte-Carlo regression toward the sampled returns (algo.tracker = "value", step algo.value_lr 0.1, V 0 at the
    # start; tabsim.sim.critic); verl's ppo_trainer defaults otherwise: clip 0.2, token-mean, no KL (use_kl_in_reward
    # and use_kl_loss off), one epoch. verl's PPO draws one answer per prompt (rollout.n = 1); a group here holds two.
    "ppo": {"algo": _algo(tracker="value", value_lr=0.1), "train": {"group_size": 2}},
    # OPMD as arXiv 2509.24203 reinterprets it (the authors' Trinity-RFT example examples/rec_gsm8k, "Kimi's OPMD": rec
    # with clip_mode none, weight none, regularizer k2, regularizer_coef 0.1, std_normalize false): group-relative
    # REINFORCE plus 0.1 (logp - logp_old)^2 on every token, token-mean, no KL, 8 answers (tabsim.sim.algos.rec.opmd).
    "opmd": {"algo": _algo(estimator="dr_grpo", surrogate="opmd", opmd_coef=0.1, aggregation="token-mean"),
             "train": {"group_size": 8}},
    # DCPO (arXiv 2509.02333) with its smooth advantage standardization (algo.tracker = "dcpo_sas", tabsim.sim.sas:
    # each answer's advantage the smaller-magnitude blend, weights 1/k and 1 - 1/k over a prompt's k groups, of the
    # group's z-score and the z-score under the prompt's reward statistics over all its groups so far), as the
    # authors' code computes it with reward_model.use_old_mean.enable (their run_dcpo.sh leaves it off); the dcpo
    # preset's dynamic and dual clip otherwise.
    "dcpo_sas": {"algo": _algo(surrogate="dcpo", eps_low=0.2, eps_high=0.28, dual_clip_c=10.0,
                               aggregation="seq-mean-token-mean", tracker="dcpo_sas")},
    "spurious_rewards": {
        "arms": {"arms": ["frozen", "random", "format", "incorrect", "majority_offline", "true"], "gamma": 0.5,
                 "offline_samples": 64},
        "algo": _algo(epochs=8, minibatches=1),
        "train": {"group_size": 16},
    },
}
