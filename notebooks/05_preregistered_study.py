# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: kernelspec,jupytext,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · A pre-registered study, from lock to report
#
# *Level: intermediate · runs in about 12 s on 2 cores · reference:
# [pre-registration](../docs/prereg.md), [`tabsim prereg`](../docs/cli.md#tabsim-prereg), [what the
# intervals mean](../docs/science.md#what-the-intervals-mean)*
#
# **The idea.** "Pre-registered" means something only if anyone can check that the plan existed
# before the data, that the analysis which ran is the one the plan named, and that every outcome was
# reported. `tabsim.prereg` turns each of these into a file you can check:
#
# 1. **validate** the plan (schema and cross-references, every problem named by its field);
# 2. **lock** it: a SHA-256 of its normalised content, with the UTC time, before any result exists;
# 3. **run** it: a confirmatory run refuses a plan that no longer matches its lock;
# 4. **report**: every hypothesis gets SUPPORTED / NOT SUPPORTED / INCONCLUSIVE from its pre-stated
#    rule, whatever the outcome, and a report is refused for a run folder that was altered.
#
# The command line does the same (`tabsim prereg validate|lock|run|report|amend`, see
# [pre-registration](../docs/prereg.md)). Everything here is written to a temporary folder.

# %%
import json
import tempfile
from pathlib import Path

import pandas as pd
import yaml
from IPython.display import Markdown, display

from tabsim import prereg

_tmp = tempfile.TemporaryDirectory(prefix="tabsim-prereg-")  # removed when the kernel stops
WORK = Path(_tmp.name)
PLAN = WORK / "plan.yaml"
OUT = WORK / "results"
print("working in", WORK)

# %% [markdown]
# ## The plan
#
# A 2 x 2 x 2 factorial with the `paper` preset: reward (TRUE vs MAJORITY, the arm factor) x prior
# strength (0.8: the prior's mode is correct; 0.35: it is wrong) x learning rate (0.1, 0.05). The
# other two arms, FROZEN and RANDOM, run as well: the partition terms need them. Both numeric factors
# are traced values, so the whole design is one compiled program.
#
# Five confirmatory hypotheses, each with its estimand, the condition it is evaluated at (a level of
# every other factor), its prediction and one decision rule:
#
# * H1 / H2: majority reward beats random reward where the mode is correct, and loses where it is
#   wrong (`d_elicit`, interval rules), each behind a manipulation check that the prior really has
#   that mode;
# * H3: TRUE's lead over MAJORITY is larger at the weak prior (the reward x prior coefficient `AB` of
#   the effect-coded factorial model is negative);
# * H4: on-policy random reward does nothing (`d_null` equivalent to 0 within 0.02: TOST);
# * H5: the learning rate hardly matters (its main effect `C` within +/- 0.005 of 0: TOST).
#
# Eight fresh seeds per cell, a fixed stopping rule, Student t intervals and Holm's correction over
# the confirmatory rules.

# %%
PLAN_TEXT = """\
schema: tabsim.prereg/1
title: "Reward x prior x learning rate (teaching example)"
authors: [a tabsim user]
rationale: >
  The self-consistency crossover: majority reward sharpens the policy toward its modal answer, so it should help
  where the prior's mode is correct and hurt where it is wrong, and a verifier should add the most
  where the mode is wrong. Settings are the paper preset's, with 100 steps.
design:
  preset: paper
  seeds: 8
  first_seed: 5000          # fresh seeds, apart from any pilot
  steps: 100
  factors:
    - {name: reward, field: arm, levels: ["true", majority]}
    - {name: prior_strength, field: prior_strength, levels: [0.8, 0.35]}
    - {name: lr, field: lr, levels: [0.1, 0.05]}
  checks:
    - {id: mode_right, metric: mode_correct, arm: frozen, condition: {prior_strength: 0.8},
       reduce: min, op: eq, value: 1}
    - {id: mode_wrong, metric: mode_correct, arm: frozen, condition: {prior_strength: 0.35},
       reduce: max, op: eq, value: 0}
analysis:
  metric: pass1
  alpha: 0.05
  correction: holm
  ci_method: t
  factorial:                # letters A, B, C in this order
    factors: [reward, prior_strength, lr]
    formula: "pass1 ~ C(reward, Sum) * C(prior_strength, Sum) * C(lr, Sum)"
  thresholds: {null_margin: 0.02, lr_margin: 0.005}
  power: {note: "teaching example: 8 seeds, no power analysis"}
stopping_rule: {kind: fixed, description: "every seed runs once; no interim looks"}
hypotheses:
  - id: H1
    statement: "Majority reward raises pass@1 over random reward where the prior's mode is correct."
    estimand: d_elicit
    condition: {prior_strength: 0.8, lr: 0.05}
    prediction: greater
    rule: {ci_lower_gt: 0}
    requires: [mode_right]
  - id: H2
    statement: "Majority reward lowers pass@1 below random reward where the prior's mode is wrong."
    estimand: d_elicit
    condition: {prior_strength: 0.35, lr: 0.05}
    prediction: less
    rule: {ci_upper_lt: 0}
    requires: [mode_wrong]
  - id: H3
    statement: "TRUE's lead over MAJORITY is larger at the weak prior: the AB coefficient is negative."
    estimand: "coefficient:AB"
    prediction: less
    rule: {ci_upper_lt: 0}
  - id: H4
    statement: "On-policy random reward leaves pass@1 within 0.02 of the frozen policy."
    estimand: d_null
    condition: {prior_strength: 0.8, lr: 0.05}
    prediction: equivalent
    rule: {tost: {margin: null_margin}}
  - id: H5
    statement: "Doubling the learning rate hardly matters: the main effect C is within 0.005 of 0."
    estimand: "coefficient:C"
    prediction: equivalent
    rule: {tost: {margin: lr_margin}}
exploratory:
  - {id: E1, estimand: interaction_ratio, description: "largest interaction over largest main effect"}
  - {id: E2, estimand: rd_fraction, condition: {prior_strength: 0.8, lr: 0.05},
     description: "reward-design fraction, strong prior"}
  - {id: E3, estimand: rd_fraction, condition: {prior_strength: 0.35, lr: 0.05},
     description: "reward-design fraction, weak prior"}
"""
PLAN.write_text(PLAN_TEXT)
print(f"wrote {PLAN} ({len(PLAN_TEXT.splitlines())} lines)")

# %% [markdown]
# ## 1. Validate
#
# `load_plan` parses the YAML safely and checks it; `validate_document` returns the problems
# instead of raising. A plan with mistakes shows what the checks catch: a rule that cannot decide
# its prediction, a condition on a level the design does not run, an unknown estimand.

# %%
plan, doc = prereg.load_plan(PLAN)
print(f"valid: {len(plan.confirmatory)} confirmatory hypotheses, {len(plan.exploratory)} exploratory analyses")

broken = yaml.safe_load(PLAN_TEXT)
broken["hypotheses"][0]["rule"] = {"ci_upper_lt": 0}
broken["hypotheses"][1]["condition"] = {"prior_strength": 0.5, "lr": 0.05}
broken["hypotheses"][2]["estimand"] = "d_magic"
_, problems = prereg.validate_document(broken)
print("\n".join(problems))

# %% [markdown]
# ## 2. Lock, before any result exists
#
# The lock file sits beside the plan. Its hash is taken over the *normalised* plan (the canonical
# JSON of the parsed YAML), so comments and layout do not matter while every value does. A lock is
# never overwritten.

# %%
record = prereg.lock(PLAN)
print(json.dumps({k: record[k] for k in ("file", "sha256", "locked_at_utc", "git_commit", "tabsim_version")},
                 indent=2))
try:
    prereg.lock(PLAN)
except prereg.PreregError as err:
    print("second lock refused:", str(err).splitlines()[0])

# %% [markdown]
# ## 3. A changed plan is refused
#
# Suppose someone doubles the seeds and raises the bar of H1 after locking. A confirmatory run
# verifies the plan against the lock first, and the message names every changed field:

# %%
PLAN.write_text(PLAN_TEXT.replace("seeds: 8", "seeds: 16").replace("ci_lower_gt: 0}", "ci_lower_gt: 0.05}"))
try:
    prereg.run_study(PLAN, OUT)
except prereg.PreregError as err:
    print(err)

# %% [markdown]
# A legitimate change goes through `prereg.amend(PLAN, reason)` (`tabsim prereg amend`), which
# records the old and new hashes, the changed fields and the reason, and every later report lists
# it as a deviation. Here we simply restore the locked plan:

# %%
PLAN.write_text(PLAN_TEXT)
print("lock matches:", prereg.verify(PLAN)["sha256"] == record["sha256"])

# %% [markdown]
# ## 4. Run
#
# `run_study` verifies the lock, writes `status.json` (`running`), trains the design (one compiled
# program: the prior strength is traced), writes `data.parquet` and `results.json`, then marks the
# run `complete` with the SHA-256 of both files, and writes the report.

# %%
results = prereg.run_study(PLAN, OUT)
verdicts = pd.DataFrame(results["analysis"]["hypotheses"])
verdicts[["id", "estimand", "condition", "estimate", "ci_low", "ci_high", "rule_text", "verdict"]]

# %% [markdown]
# Every confirmatory hypothesis is in the table with the verdict its rule gives, including a
# prediction that fails: a NOT SUPPORTED row is part of the record, not something to drop. The
# exploratory analyses come with intervals and no verdict:

# %%
pd.DataFrame(results["analysis"]["exploratory"])[["id", "estimand", "condition", "estimate", "ci_low", "ci_high"]]

# %%
status = json.loads((OUT / "status.json").read_text())
print(json.dumps({k: status[k] for k in ("state", "mode", "started_utc", "finished_utc", "files")}, indent=2))
print("locked before the run started:", record["locked_at_utc"] < status["started_utc"])

# %% [markdown]
# ## 5. The report
#
# `report.md` lists every hypothesis with its verdict, interval and rule, the exploratory analyses
# (labelled as such), the manipulation checks and the deviations from the plan.

# %%
display(Markdown((OUT / "report.md").read_text()))

# %% [markdown]
# A report is only written for a complete, unaltered run. Change one byte of the data and
# `write_report` refuses:

# %%
with open(OUT / "data.parquet", "ab") as fh:
    fh.write(b"\0")
try:
    prereg.write_report(OUT)
except prereg.PreregError as err:
    print("report refused:", err)

# %% [markdown]
# ## What to try
#
# * Change the plan after locking and record it with `prereg.amend(PLAN, "why")`; rerun with
#   `overwrite=True` and find the amendment under "Deviations" in the report.
# * Make a rule stricter than the data can support (say `ci_lower_gt: 0.06` for H1) and see it
#   become INCONCLUSIVE or NOT SUPPORTED.
# * Add a factor with a static field, e.g. `{name: epochs, field: algo.epochs, levels: [1, 4]}` (one
#   compiled program per level), and condition the hypotheses on it.
# * Read the two shipped studies: `preregistration/reference_factorial` and
#   `preregistration/clipping_null`, each with its lock and `results/report.md`.

# %% [markdown]
# ## Exercises
#
# Try each one before opening its answer.
#
# 1. After locking, you fix a typo in a YAML *comment* of the plan. Will a confirmatory run accept
#    it? And if you change `seeds` from 8 to 16?
#
# <details><summary>Answer</summary>
#
# The comment: yes, the lock's hash is taken over the normalised plan (the canonical JSON of the
# parsed YAML), so comments and layout do not count. The seeds: no, every value counts; the run is
# refused with the changed field named, and the legitimate route is an amendment, which every later
# report lists as a deviation.
#
# </details>
#
# 2. H4 (on-policy random reward does nothing) is an equivalence test (TOST within 0.02), not "the
#    interval contains 0". Why?
#
# <details><summary>Answer</summary>
#
# An interval that contains 0 only says the sign is not settled: a small, noisy study would
# "support" no effect most easily. TOST asks the whole (90%) interval to lie inside +/-0.02, so it
# supports "no effect larger than 0.02" only when the study is precise enough to show it.
#
# </details>
