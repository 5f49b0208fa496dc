"""Bad input is refused at the edge: every case below is one input a new user or an adversary might give.

Each CLI case runs in-process through click's ``CliRunner`` and must exit non-zero with a message and no
traceback (``result.exception`` is the ``SystemExit`` of a click error), naming the field or option at
fault. Inputs that could hang a naive loader (alias bombs, deep nesting, huge files) also run once as a
real subprocess with a timeout, and the time to the refusal is printed (measured, not asserted).

Memory cases are sized far beyond any machine (terabytes), so a regression fails at the first
allocation instead of swapping.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]

# a small, valid run: every CLI case starts from it and changes one thing
BASE = {
    "": {"preset": '"paper"'},
    "task": {"n_prompts": "8"},
    "train": {"steps": "2", "seeds": "2", "batch_size": "4", "group_size": "2"},
}


def toml(drop: tuple = (), **sections) -> str:
    """The base config as TOML with ``sections`` ({key: raw TOML value}) merged in; ``drop`` removes keys."""
    merged = {s: dict(v) for s, v in BASE.items()}
    for sec, kv in sections.items():
        merged.setdefault(sec, {}).update(kv)
    for key in drop:
        sec, _, k = key.rpartition(".")
        merged.get(sec, {}).pop(k, None)
    lines = [f"{k} = {v}" for k, v in merged.pop("").items()]
    for sec, kv in merged.items():
        lines.append(f"[{sec}]")
        lines += [f"{k} = {v}" for k, v in kv.items()]
    return "\n".join(lines) + "\n"


def yaml_cfg(**sections) -> str:
    """The base config as YAML with ``sections`` ({key: raw YAML value}) merged in."""
    merged = {s: dict(v) for s, v in BASE.items()}
    for sec, kv in sections.items():
        merged.setdefault(sec, {}).update(kv)
    lines = [f"{k}: {v.strip(chr(34))}" for k, v in merged.pop("").items()]
    for sec, kv in merged.items():
        lines.append(f"{sec}:")
        lines += [f"  {k}: {v}" for k, v in kv.items()]
    return "\n".join(lines) + "\n"


def alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + f"\ntrain:\n  seeds: *a{levels - 1}\n"


DEEP = 100_000
AUDIT_OK = """source: {id: t, paper: P, table: T1}
entries:
  - model: M
    benchmark: B
    n_items: 500
    samples_per_item: greedy
    values: absolute
    gamma: 0.5
    majority_kind: online
    arms: {base: 49.4, random: 51.0, majority: 55.2, true: 60.1}
"""
PREREG_OK = (ROOT / "preregistration").glob("*/plan.yaml")


def audit_yaml(**entry) -> str:
    """``AUDIT_OK`` with entry fields replaced (raw YAML values)."""
    lines = AUDIT_OK.splitlines()
    out = []
    for ln in lines:
        key = ln.strip().split(":")[0]
        if ln.startswith("    ") and key in entry:
            out.append(f"    {key}: {entry.pop(key)}")
        else:
            out.append(ln)
    out += [f"    {k}: {v}" for k, v in entry.items()]
    return "\n".join(out) + "\n"


AUDIT_CSV_HEAD = "source_id,paper,table,model,benchmark,n_items,samples_per_item,values,gamma,base,random,true\n"


@dataclasses.dataclass
class Case:
    """One bad input: ``args`` of ``tabsim`` ({f} is the written file, {out} an output folder), the file's
    content (text, bytes, or a callable writing it), and the words the message must contain."""

    id: str
    args: list
    names: tuple
    content: object = None
    suffix: str = ".toml"
    slow: bool = False  # hang-prone: also run once as a real subprocess

    def write(self, tmp: Path) -> Path:
        path = tmp / f"input{self.suffix}"
        if callable(self.content):
            self.content(path)
        elif isinstance(self.content, bytes):
            path.write_bytes(self.content)
        elif self.content is not None:
            path.write_text(self.content, encoding="utf-8")
        return path


def run_case(f, *extra) -> list:
    return ["run", "{f}", "--out", "{out}", "-q", *extra]


def sweep_case(*extra) -> list:
    return ["sweep", "--config", "{f}", "--out", "{out}", "-q", *extra]


def _huge_text(size: int, line: str):
    def write(path: Path):
        with open(path, "w") as fh:
            block = line * ((1 << 16) // len(line) + 1)
            while fh.tell() < size:
                fh.write(block)
    return write


def _deep_yaml(path: Path):
    path.write_text("train: " + "[" * DEEP + "]" * DEEP + "\n")


def _deep_yaml_map(path: Path):
    path.write_text("a: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n")


def _deep_toml(path: Path):
    path.write_text("x = " + "[" * DEEP + "]" * DEEP + "\n")


def _deep_toml_inline(path: Path):
    path.write_text("x = " + "{a = " * DEEP + "1" + "}" * DEEP + "\n")


R = run_case(None)
CASES = [
    # -- non-finite and absurd numbers ----------------------------------------------------------
    Case("lr-inf", R, ("algo.lr",), toml(algo={"lr": "inf"})),
    Case("lr-nan", R, ("algo.lr",), toml(algo={"lr": "nan"})),
    Case("lr-1e308", R, ("algo.lr",), toml(algo={"lr": "1e308"})),
    Case("lr-neg-inf", R, ("algo.lr",), toml(algo={"lr": "-inf"})),
    Case("lr-zero", R, ("algo.lr",), toml(algo={"lr": "0.0"})),
    Case("beta-inf", R, ("algo.beta",), toml(algo={"beta": "inf"})),
    Case("beta-nan", R, ("algo.beta",), toml(algo={"beta": "nan"})),
    Case("beta-1e308", R, ("algo.beta",), toml(algo={"beta": "1e308"})),
    Case("format_boost-inf", R, ("task.format_boost",), toml(task={"format_boost": "inf"})),
    Case("format_boost-1e308", R, ("task.format_boost",), toml(task={"format_boost": "1e308"})),
    Case("format_boost-nan", R, ("task.format_boost",), toml(task={"format_boost": "nan"})),
    Case("heterogeneity-inf", R, ("task.heterogeneity",), toml(task={"heterogeneity": "inf"})),
    Case("heterogeneity-nan", R, ("task.heterogeneity",), toml(task={"heterogeneity": "nan"})),
    Case("heterogeneity-1e308", R, ("task.heterogeneity",), toml(task={"heterogeneity": "1e308"})),
    Case("prior_strength-nan", R, ("task.prior_strength",), toml(task={"prior_strength": "nan"})),
    Case("gamma-nan", R, ("arms.gamma",), toml(arms={"gamma": "nan"})),
    Case("std_eps-inf", R, ("algo.std_eps",), toml(algo={"std_eps": "inf"})),
    Case("eps_high-inf", R, ("algo.eps_high",), toml(algo={"eps_high": "inf"})),
    Case("eps_low-1e308", R, ("algo.eps_low",), toml(algo={"eps_low": "1e308"})),
    Case("ent_coef-nan", R, ("algo.ent_coef",), toml(algo={"ent_coef": "nan"})),
    Case("max_grad_norm-nan", R, ("algo.max_grad_norm",), toml(algo={"max_grad_norm": "nan"})),
    Case("max_grad_norm-inf", R, ("algo.max_grad_norm",), toml(algo={"max_grad_norm": "inf"})),
    Case("adam_eps-inf", R, ("algo.adam_eps",), toml(algo={"adam_eps": "inf", "optimizer": '"adam"'})),
    Case("dual_clip_c-inf", R, ("algo.dual_clip_c",), toml(algo={"dual_clip_c": "inf"})),
    Case("sapo_tau_pos-1e308", R, ("algo.sapo_tau_pos",), toml(algo={"sapo_tau_pos": "1e308"})),
    # -- sweep levels -----------------------------------------------------------------------------
    Case("sweep-lr-inf", R, ("sweep.lr",), toml(sweep={"lr": "[0.1, inf]"})),
    Case("sweep-lr-nan", R, ("sweep.lr",), toml(sweep={"lr": "[nan]"})),
    Case("sweep-beta-1e308", R, ("sweep.beta",), toml(sweep={"beta": "[1e308]"})),
    Case("sweep-format_boost-inf", R, ("sweep.format_boost",), toml(sweep={"format_boost": "[0.2, inf]"})),
    Case("sweep-lr-string", R, ("sweep.lr",), toml(sweep={"lr": '["0.1"]'})),
    Case("sweep-lr-bool", R, ("sweep.lr",), toml(sweep={"lr": "[true]"})),
    Case("sweep-lr-scalar", R, ("sweep.lr",), toml(sweep={"lr": "0.1"})),
    Case("sweep-lr-empty", R, ("sweep.lr",), toml(sweep={"lr": "[]"})),
    Case("sweep-lr-repeated-level", R, ("sweep.lr",), toml(sweep={"lr": "[0.1, 0.1]"})),
    Case("sweep-not-numeric", R, ("sweep.task.n_prompts[0]", "integer"), toml(sweep={"n_prompts": "[\"a\", 16]"})),
    Case("sweep-typo", R, ("sweep.prior_strenght", "prior_strength"), toml(sweep={"prior_strenght": "[0.3]"})),
    Case("sweep-filter-half", R, ("sweep.filter",), toml(sweep={"filter": "[0.5]"})),
    Case("sweep-std_ddof-2", R, ("sweep.std_ddof",), toml(sweep={"std_ddof": "[0, 2]"})),
    Case("sweep-nested-table", R, ("sweep.lr",), toml(sweep={"lr": "{a = 1}"})),
    # -- --vary -----------------------------------------------------------------------------------
    Case("vary-repeated-field", sweep_case("--vary", "lr=0.1", "--vary", "lr=0.2"), ("--vary", "lr"), toml()),
    Case("vary-inf", sweep_case("--vary", "lr=inf"), ("--vary", "lr"), toml()),
    Case("vary-nan", sweep_case("--vary", "lr=0.1,nan"), ("--vary", "lr"), toml()),
    Case("vary-1e308", sweep_case("--vary", "lr=1e308"), ("lr",), toml()),
    Case("vary-word", sweep_case("--vary", "lr=0.1,abc"), ("--vary", "lr"), toml()),
    Case("vary-no-equals", sweep_case("--vary", "lr"), ("--vary",), toml()),
    Case("vary-no-levels", sweep_case("--vary", "lr="), ("--vary",), toml()),
    Case("vary-no-field", sweep_case("--vary", "=0.1"), ("--vary",), toml()),
    Case("vary-empty-level", sweep_case("--vary", "lr=0.1,,0.2"), ("--vary", "lr"), toml()),
    Case("vary-typo", sweep_case("--vary", "prior_strenght=0.3"), ("prior_strength",), toml()),
    Case("vary-out-of-range", sweep_case("--vary", "prior_strength=1.5"), ("prior_strength",), toml()),
    Case("vary-negative-lr", sweep_case("--vary", "lr=-0.1"), ("lr",), toml()),
    Case("vary-repeated-level", sweep_case("--vary", "lr=0.1,0.1"), ("lr",), toml()),
    # -- CLI options --------------------------------------------------------------------------------
    Case("run-seeds-0", run_case(None, "--seeds", "0"), ("--seeds",), toml()),
    Case("run-seeds-negative", run_case(None, "--seeds", "-1"), ("--seeds",), toml()),
    Case("run-seeds-float", run_case(None, "--seeds", "1e9"), ("--seeds",), toml()),
    Case("run-seeds-huge", run_case(None, "--seeds", "10000000"), ("--seeds",), toml()),
    Case("run-steps-0", run_case(None, "--steps", "0"), ("--steps",), toml()),
    Case("run-steps-float", run_case(None, "--steps", "2.5"), ("--steps",), toml()),
    Case("run-steps-word", run_case(None, "--steps", "abc"), ("--steps",), toml()),
    Case("sweep-seeds-0", sweep_case("--seeds", "0"), ("--seeds",), toml()),
    Case("sweep-steps-negative", sweep_case("--steps", "-5"), ("--steps",), toml()),
    Case("sweep-steps-huge", sweep_case("--steps", "100000000000"), ("--steps",), toml()),
    Case("sweep-unknown-arm", sweep_case("--arms", "true,bogus"), ("arm", "bogus"), toml()),
    Case("sweep-unknown-preset", sweep_case("--preset", "papr"), ("preset", "paper"), toml()),
    # -- types: no coercion -------------------------------------------------------------------------
    Case("seeds-bool", R, ("train.seeds",), toml(train={"seeds": "true"})),
    Case("steps-2.5", R, ("train.steps",), toml(train={"steps": "2.5"})),
    Case("steps-2.0", R, ("train.steps",), toml(train={"steps": "2.0"})),
    Case("steps-string", R, ("train.steps",), toml(train={"steps": '"2"'})),
    Case("seeds-string", R, ("train.seeds",), toml(train={"seeds": '"2"'})),
    Case("n_prompts-float", R, ("task.n_prompts",), toml(task={"n_prompts": "8.0"})),
    Case("lr-string", R, ("algo.lr",), toml(algo={"lr": '"0.1"'})),
    Case("filter-string", R, ("algo.filter",), toml(algo={"filter": '"yes"'})),
    Case("filter-int", R, ("algo.filter",), toml(algo={"filter": "1"})),
    Case("seeds-list", R, ("train.seeds", "train.seed"), toml(train={"seeds": "[1, 2, 3]"})),
    Case("seeds-zero", R, ("train.seeds", "train.seed"), toml(train={"seeds": "0"})),
    Case("seed-list", R, ("train.seed", "train.seeds"), toml(train={"seed": "[0, 1]"})),
    Case("seed-negative", R, ("train.seed",), toml(train={"seed": "-1"})),
    Case("pass_k-bool", R, ("train.pass_k",), toml(train={"pass_k": "[true]"})),
    Case("pass_k-scalar", R, ("train.pass_k",), toml(train={"pass_k": "4"})),
    Case("pass_k-huge", R, ("train.pass_k",), toml(train={"pass_k": "[1000000000]"})),
    Case("arms-string", R, ("arms.arms",), toml(arms={"arms": '"true"'})),
    Case("eval_every-0", R, ("train.eval_every",), toml(train={"eval_every": "0"})),
    Case("chunk_conditions-0", R, ("train.chunk_conditions",), toml(train={"chunk_conditions": "0"})),
    Case("offline_samples-float", R, ("arms.offline_samples",), toml(arms={"offline_samples": "1.5"})),
    Case("std_ddof-2", R, ("algo.std_ddof",), toml(algo={"std_ddof": "2"})),
    Case("epochs-exponent", R, ("algo.epochs",), toml(algo={"epochs": "1e3"})),
    Case("batch_size-huge", R, ("train.batch_size",), toml(train={"batch_size": "1000000000000"})),
    Case("task-not-table", R, ("task",), toml(drop=("task.n_prompts",)).replace("[task]\n", "task = 3\n")),
    # -- keys ---------------------------------------------------------------------------------------
    Case("key-typo", R, ("task.n_promts", "n_prompts"), toml(task={"n_promts": "8"})),
    Case("section-typo", R, ("trian", "train"), toml(trian={"steps": "2"})),
    Case("key-unknown", R, ("algo.learning_rate",), toml(algo={"learning_rate": "0.1"})),
    Case("tree-in-bandit", R, ("task.tree",), toml(task={"tree": "{depth = 3}"})),
    Case("tree-key-typo", R, ("task.tree.dept", "depth"), toml(task={"env": '"tree"', "tree": "{dept = 3}"})),
    Case("tree-depth-float", R, ("task.tree.depth",), toml(task={"env": '"tree"', "tree": "{depth = 2.5}"})),
    Case("tree-depth-huge", R, ("task.tree.depth",), toml(task={"env": '"tree"', "tree": "{depth = 100}"})),
    Case("tree-too-many-pairs", R, ("task.tree.depth",),
         toml(task={"env": '"tree"', "tree": "{depth = 12, branching = 16}"})),
    Case("tree-slope-inf", R, ("task.tree.length_slope_wrong",),
         toml(task={"env": '"tree"', "tree": "{length_slope_wrong = inf}"})),
    Case("tree-slope-1e308", R, ("task.tree.length_slope_wrong",),
         toml(task={"env": '"tree"', "tree": "{length_slope_wrong = 1e308}"})),
    Case("preset-typo", R, ("preset", "paper"), toml(**{"": {"preset": '"papr"'}})),
    Case("preset-number", R, ("preset",), toml(**{"": {"preset": "3"}})),
    Case("env-typo", R, ("task.env",), toml(task={"env": '"bandt"'})),
    # -- YAML ---------------------------------------------------------------------------------------
    Case("yaml-duplicate-key", R, ("line 9", "train"), yaml_cfg() + "train:\n  steps: 4\n", ".yaml"),
    Case("yaml-duplicate-nested-key", R, ("line", "lr"), yaml_cfg(algo={"lr": "0.1\n  lr: 0.2"}), ".yaml"),
    Case("yaml-unquoted-true-arm", R, ('"true"',), yaml_cfg(arms={"arms": "[frozen, random, majority, true]"}),
         ".yaml"),
    Case("yaml-seeds-yes", R, ("train.seeds",), yaml_cfg(train={"seeds": "yes"}), ".yaml"),
    Case("yaml-lr-inf", R, ("algo.lr",), yaml_cfg(algo={"lr": ".inf"}), ".yaml"),
    Case("yaml-lr-nan", R, ("algo.lr",), yaml_cfg(algo={"lr": ".nan"}), ".yaml"),
    Case("yaml-seeds-float", R, ("train.seeds",), yaml_cfg(train={"seeds": "8.0"}), ".yaml"),
    Case("yaml-empty", R, ("empty",), "", ".yaml"),
    Case("yaml-only-comments", R, ("empty",), "# nothing here\n", ".yaml"),
    Case("yaml-top-list", R, ("mapping",), "- 1\n- 2\n", ".yaml"),
    Case("yaml-top-scalar", R, ("mapping",), "hello\n", ".yaml"),
    Case("yaml-alias-bomb", R, ("alias",), alias_bomb(), ".yaml", slow=True),
    Case("yaml-deep-lists", R, ("deep",), _deep_yaml, ".yaml", slow=True),
    Case("yaml-deep-maps", R, ("deep",), _deep_yaml_map, ".yaml"),
    Case("yaml-huge", R, ("MiB",), _huge_text(20 << 20, "# padding padding padding\n"), ".yaml", slow=True),
    Case("yaml-binary", R, ("UTF-8",), bytes(range(256)) * 64, ".yaml"),
    Case("yaml-latin1", R, ("UTF-8", "line 1"), "preset: paper # caf\u00e9\n".encode("latin-1"), ".yaml"),
    Case("yaml-utf16", R, ("UTF-8",), yaml_cfg().encode("utf-16"), ".yaml"),
    Case("yaml-tab-indent", R, ("line",), "train:\n\tsteps: 2\n", ".yaml"),
    Case("yaml-python-tag", R, ("line",), "preset: !!python/object/apply:os.system ['echo hi']\n", ".yaml"),
    Case("yaml-multi-document", R, ("document",), yaml_cfg() + "---\npreset: paper\n", ".yaml"),
    Case("yaml-key-true", R, ("train",), yaml_cfg(train={"on": "3"}), ".yaml"),
    Case("yml-with-toml-content", R, ("top level", "TOML"), toml(), ".yml"),
    # -- files --------------------------------------------------------------------------------------
    Case("suffix-ini", R, ("format", ".ini", ".json"), "{}", ".ini"),
    Case("json-empty-object", R, ("empty",), "{}", ".json"),
    Case("json-nan", R, ("NaN", "finite"), '{"preset": "paper", "algo": {"lr": NaN}}', ".json"),
    Case("json-duplicate-key", R, ("given twice",), '{"preset": "paper", "preset": "dapo"}', ".json"),
    Case("json-top-list", R, ("mapping",), "[1, 2]", ".json"),
    Case("json-deep", R, ("deep",), "[" * DEEP + "]" * DEEP, ".json"),
    Case("json-syntax", R, ("line 1",), '{"preset": paper}', ".json"),
    Case("json-unknown-field", R, ("algo.learning_rate",), '{"preset": "paper", "algo": {"learning_rate": 0.1}}',
         ".json"),
    Case("missing-file", ["run", "{f}.nope", "--out", "{out}"], ("not found",), toml()),
    Case("directory", ["run", "{d}", "--out", "{out}"], ("directory",), toml()),
    Case("toml-syntax", R, ("line",), "preset = paper\n"),
    Case("toml-duplicate-key", R, ("line",), toml() + "[train]\nsteps = 3\n"),
    Case("toml-deep-arrays", R, ("deep",), _deep_toml),
    Case("toml-deep-tables", R, ("deep",), _deep_toml_inline),
    Case("toml-huge", R, ("MiB",), _huge_text(20 << 20, "# padding padding padding\n")),
    Case("toml-binary", R, ("UTF-8",), bytes(range(256)) * 64),
    Case("toml-latin1", R, ("UTF-8",), 'preset = "paper" # caf\u00e9\n'.encode("latin-1")),
    Case("toml-empty", R, ("empty",), ""),
    Case("toml-nul", R, ("line",), b'preset = "paper"\x00\n'),
    Case("fifo", R, ("regular file",), lambda p: os.mkfifo(p), ".yaml"),
    Case("toml-huge-int", R, ("train.seeds",), toml(train={"seeds": "99999999999999999999999"})),
    Case("yaml-1e999", R, ("algo.lr",), yaml_cfg(algo={"lr": "1e999"}), ".yaml"),
    Case("yaml-null-key", R, ("None",), yaml_cfg(task={"~": "3"}), ".yaml"),
    Case("yaml-list-key", R, ("line",), yaml_cfg(task={"[a, b]": "3"}), ".yaml"),
    Case("yaml-bool-key", R, ("train.True",), yaml_cfg(train={"true": "3"}), ".yaml"),
    # -- memory ---------------------------------------------------------------------------------------
    Case("memory-prompts", R, ("memory", "train.chunk_conditions", "seeds", "n_prompts"),
         toml(task={"n_prompts": "1000000"}, train={"seeds": "100000", "batch_size": "16"})),
    Case("memory-tree", R, ("memory", "task.tree"),
         toml(task={"env": '"tree"', "n_prompts": "4000", "tree": "{depth = 7, branching = 8}"},
              train={"seeds": "4096"})),
    Case("memory-sweep-seeds", sweep_case("--seeds", "100000", "--vary", "lr=0.1,0.2"), ("memory",),
         toml(task={"n_prompts": "200000"}, train={"batch_size": "16"})),
    # -- audit tables ------------------------------------------------------------------------------
    Case("audit-fraction-and-percent", ["audit", "{f}", "--out", "{out}", "--no-calibration"],
         ("arms.frozen", "percent", "0.494"), audit_yaml(arms="{base: 0.494, random: 51.0, majority: 55.2, true: 60.1}"),
         ".yaml"),
    Case("audit-n_items-1e12", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("n_items",),
         audit_yaml(n_items="1.0e12"), ".yaml"),
    Case("audit-n_items-int-huge", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("n_items",),
         audit_yaml(n_items="1000000000000"), ".yaml"),
    Case("audit-n_items-float", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("n_items",),
         audit_yaml(n_items="500.5"), ".yaml"),
    Case("audit-n_items-bool", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("n_items",),
         audit_yaml(n_items="true"), ".yaml"),
    Case("audit-samples-huge", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("samples_per_item",),
         audit_yaml(samples_per_item="avg@100000000000"), ".yaml"),
    Case("audit-arm-inf", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("arms.true",),
         audit_yaml(arms="{base: 49.4, random: 51.0, majority: 55.2, true: .inf}"), ".yaml"),
    Case("audit-gamma-nan", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("gamma",),
         audit_yaml(gamma=".nan"), ".yaml"),
    Case("audit-alias-bomb", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("alias",),
         alias_bomb(), ".yaml"),
    Case("audit-deep", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("deep",), _deep_yaml, ".yaml"),
    Case("audit-binary", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("UTF-8",),
         bytes(range(256)) * 64, ".yaml"),
    Case("audit-empty", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("empty",), "", ".yaml"),
    Case("audit-csv-latin1", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("UTF-8",),
         (AUDIT_CSV_HEAD + "t,P\u00e9,T1,M,B,500,greedy,absolute,0.5,40.0,41.0,50.0\n").encode("latin-1"), ".csv"),
    Case("audit-csv-nul", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("line",),
         (AUDIT_CSV_HEAD + "t,P,T1,M,B,500,greedy,absolute,0.5,40.0,41.0,5\x000.0\n").encode(), ".csv"),
    Case("audit-csv-huge-field", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("line",),
         AUDIT_CSV_HEAD + "t,P,T1,M,B,500,greedy,absolute,0.5,40.0,41.0,\"" + "5" * 200_000 + "\"\n", ".csv"),
    Case("audit-csv-huge", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("MiB",),
         _huge_text(20 << 20, "# padding padding padding\n"), ".csv"),
    Case("audit-csv-fraction-and-percent", ["audit", "{f}", "--out", "{out}", "--no-calibration"],
         ("percent",), AUDIT_CSV_HEAD + "t,P,T1,M,B,500,greedy,absolute,0.5,0.494,51.0,60.1\n", ".csv"),
    Case("audit-csv-n_items-huge", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("n_items",),
         AUDIT_CSV_HEAD + "t,P,T1,M,B,1e12,greedy,absolute,0.5,40.0,41.0,50.0\n", ".csv"),
    Case("audit-n_items-1", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("n_items", ">= 2"),
         audit_yaml(n_items="1"), ".yaml"),
    Case("audit-n_items-string", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("n_items", "string"),
         audit_yaml(n_items='"500"'), ".yaml"),
    Case("audit-csv-row-one-cell-short", ["audit", "{f}", "--out", "{out}", "--no-calibration"],
         ("line 2", "11 cells but 12 columns"), AUDIT_CSV_HEAD + "t,P,T1,M,B,500,greedy,absolute,0.5,40.0,41.0\n", ".csv"),
    Case("audit-csv-header-only", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("no data rows",),
         AUDIT_CSV_HEAD, ".csv"),
    Case("audit-csv-n_items-1", ["audit", "{f}", "--out", "{out}", "--no-calibration"], ("n_items",),
         AUDIT_CSV_HEAD + "t,P,T1,M,B,1,greedy,absolute,0.5,40.0,41.0,50.0\n", ".csv"),
    # -- outputs and options that name nothing ----------------------------------------------------------
    Case("out-empty", ["run", "{f}", "--out", "", "-q"], ("--out", "not an output folder"), toml()),
    Case("out-dot", ["run", "{f}", "--out", ".", "-q"], ("--out", "not an output folder"), toml()),
    Case("sweep-out-empty", ["sweep", "--config", "{f}", "--out", "", "-q"], ("--out", "not an output folder"), toml()),
    Case("audit-out-empty", ["audit", "{f}", "--out", "", "--no-calibration"], ("--out", "not an output folder"),
         audit_yaml(), ".yaml"),
    Case("reproduce-out-empty", ["reproduce", "--out", "", "-q"], ("--out", "not an output folder"), toml()),
    Case("arms-empty", sweep_case("--arms", ""), ("--arms", "no arms"), toml()),
    Case("arms-empty-item", sweep_case("--arms", "frozen,,true"), ("--arms", "empty arm"), toml()),
    Case("arms-trailing-comma", sweep_case("--arms", "frozen,true,"), ("--arms", "empty arm"), toml()),
    Case("yaml-empty-section", R, ("train", "empty"), "preset: paper\ntask:\n  n_prompts: 8\ntrain:\n", ".yaml"),
    Case("yaml-empty-section-sweep", sweep_case(), ("train", "empty"), "preset: paper\ntrain:\n", ".yaml"),
    Case("yaml-empty-task", R, ("task", "empty"), "preset: paper\ntask:\ntrain:\n  steps: 2\n", ".yaml"),
    # -- silent accepts found by a hostile pass -----------------------------------------------------
    Case("toml-empty-train-table", R, ("train", "empty"), 'preset = "paper"\n[train]\n'),
    Case("yaml-train-empty-mapping", R, ("train", "empty"), "preset: paper\ntrain: {}\n", ".yaml"),
    Case("seed-last-beyond-int32", R, ("train.seed", "2147483647", "2**31"), toml(train={"seed": "2147483647"})),
    Case("lr-denormal", R, ("algo.lr", "5e-324"), toml(algo={"lr": "5e-324"})),
    Case("lr-below-bound", R, ("algo.lr", "1e-12", "1e-20"), toml(algo={"lr": "1e-20"})),
    Case("beta-denormal", R, ("algo.beta", "1e-320"), toml(algo={"beta": "1e-320"})),
    Case("yaml-explicit-int-tag", R, ("line 3", "tag !!int"),
         "preset: paper\ntask: {n_prompts: 8}\ntrain: {steps: !!int \"2\", seeds: 2, batch_size: 4, group_size: 2}\n",
         ".yaml"),
    Case("vary-full-width-digit", sweep_case("--vary", "prior_strength=\uff10.3"), ("--vary", "prior_strength"),
         toml()),
    Case("vary-underscore", sweep_case("--vary", "lr=0.0_5"), ("--vary", "lr", "0.0_5"), toml()),
    Case("sweep-preset-empty", sweep_case("--preset", ""), ("--preset", "paper"), toml()),
    # -- pre-registration plans -----------------------------------------------------------------------
    Case("prereg-alias-bomb", ["prereg", "validate", "{f}"], ("alias",), alias_bomb(), ".yaml"),
    Case("prereg-deep", ["prereg", "validate", "{f}"], ("deep",), _deep_yaml, ".yaml"),
    Case("prereg-binary", ["prereg", "validate", "{f}"], ("UTF-8",), bytes(range(256)) * 64, ".yaml"),
    Case("prereg-empty", ["prereg", "validate", "{f}"], ("empty",), "", ".yaml"),
    Case("prereg-huge", ["prereg", "validate", "{f}"], ("MiB",), _huge_text(20 << 20, "# padding\n"), ".yaml"),
    Case("prereg-duplicate-key", ["prereg", "validate", "{f}"], ("line", "given twice"),
         "schema: tabsim.prereg/1\nschema: tabsim.prereg/1\n", ".yaml"),
]


def invoke(case: Case, tmp: Path):
    """Run ``case`` in-process; returns click's ``Result``."""
    from tabsim.cli import main

    path = case.write(tmp)
    args = [a.format(f=path, out=tmp / "out", d=tmp) for a in case.args]
    return CliRunner().invoke(main, args, prog_name="tabsim")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TABSIM_CACHE", str(tmp_path / "cache"))
    result = invoke(case, tmp_path)
    out = result.output
    assert result.exit_code != 0, f"accepted:\n{out}"
    assert isinstance(result.exception, SystemExit), f"crashed: {result.exception!r}\n{out}"
    assert "Traceback" not in out, out
    for name in case.names:
        assert name in out, f"{name!r} not named in:\n{out}"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), "wrote output"


@pytest.mark.parametrize("out", ["", ".", ".."])
def test_an_out_that_names_no_folder_leaves_nothing(out, tmp_path, monkeypatch):
    """``--out ''`` was read as the current folder and left ``..staging`` beside it."""
    from tabsim.cli import main

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "c.toml").write_text(toml())
    res = CliRunner().invoke(main, ["run", "c.toml", "--out", out, "-q"])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["c.toml", "work"], "left files behind"


def test_seed_without_seeds_says_how_many_seeds_run(tmp_path, monkeypatch, capsys):
    """``seed = 2`` without ``seeds`` runs the preset's seeds from 2: a note says so (the run goes on)."""
    from tabsim.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(toml(drop=("train.seeds",), train={"seed": "2"}))
    res = CliRunner().invoke(main, ["run", "c.toml", "--out", "o", "-q", "--no-figure"])
    assert res.exit_code == 0, res.output
    assert "note: train.seed = 2 is the first seed" in res.output and "train.seeds" in res.output
    from tabsim.cli.run import _note_seed

    _note_seed({"train": {"seed": 2, "seeds": 4}}, None)  # seeds given too: nothing to say
    _note_seed({"train": {"seed": 2}}, 4)  # --seeds given
    _note_seed({"train": {"seed": 2, "dynamics": "expected"}}, None)  # the expected flow's seed draws the task
    assert "note:" not in capsys.readouterr().err


def test_resolve_refuses_an_empty_section():
    import tabsim as ts

    with pytest.raises(ts.ConfigError, match="train: the section is empty"):
        ts.resolve({"preset": "paper", "train": None})


@pytest.mark.parametrize("case", [c for c in CASES if c.slow], ids=[c.id for c in CASES if c.slow])
def test_hang_prone_input_is_refused_in_a_subprocess(case, tmp_path):
    path = case.write(tmp_path)
    args = [a.format(f=path, out=tmp_path / "out") for a in case.args]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tabsim.cli", *args], capture_output=True, text=True,
                          timeout=20, cwd=tmp_path)
    seconds = time.perf_counter() - t0
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert case.names[0] in proc.stderr, proc.stderr
    print(f"\n{case.id}: refused in {seconds:.2f} s (process start and imports included)")


# -- the Python API refuses the same values -------------------------------------------------------
API_CASES = [
    ("seeds-bool", {"train": {"seeds": True}}, "train.seeds"),
    ("seeds-float", {"train": {"seeds": 4.0}}, "train.seeds"),
    ("steps-numpy-float", {"train": {"steps": __import__("numpy").float64(2.0)}}, "train.steps"),
    ("lr-inf", {"algo": {"lr": float("inf")}}, "algo.lr"),
    ("lr-numpy-nan", {"algo": {"lr": __import__("numpy").float32("nan")}}, "algo.lr"),
    ("beta-huge", {"algo": {"beta": 1e308}}, "algo.beta"),
    ("sweep-nan", {"sweep": {"lr": [0.1, float("nan")]}}, "sweep.lr"),
    ("sweep-string", {"sweep": {"gamma": ["0.5"]}}, "sweep.gamma"),
    ("filter-int", {"algo": {"filter": 1}}, "algo.filter"),
    ("std_ddof-bool", {"algo": {"std_ddof": True}}, "algo.std_ddof"),
    ("arms-bool", {"arms": {"arms": ["frozen", True]}}, '"true"'),
    ("estimator-typo", {"algo": {"estimator": "grpoo"}}, "did you mean `grpo`"),
    ("preset-list", {"preset": ["paper"]}, "preset"),
    ("not-a-mapping", None, "config"),
]


@pytest.mark.parametrize("data, name", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_resolve_refuses_naming_the_field(data, name):
    import tabsim as ts

    with pytest.raises(ts.ConfigError) as err:
        ts.resolve({"preset": "paper", **data} if data is not None else ["paper"])
    assert name in str(err.value)


# -- good input still works --------------------------------------------------------------------------
def test_good_values_are_accepted_as_written(tmp_path):
    import numpy as np

    import tabsim as ts

    p = tmp_path / "c.yaml"
    p.write_text('preset: paper\narms:\n  arms: [frozen, random, majority, "true"]\nalgo:\n  lr: 1e-2\n'
                 "train:\n  seeds: 2\n  pass_k: [4]\nsweep:\n  filter: [0, 1]\n  std_ddof: [0, 1]\n")
    cfg = ts.load_config(p)
    assert cfg.algo.lr == 0.01 and cfg.arms.arms[-1] == "true" and cfg.sweep["filter"] == [0.0, 1.0]
    cfg = ts.resolve({"preset": "paper", "task": {"n_prompts": np.int64(16)}, "train": {"pass_k": (4,)},
                      "sweep": {"lr": np.asarray([0.1, 0.2])}})
    assert cfg.task.n_prompts == 16 and cfg.train.pass_k == [4] and cfg.sweep["lr"] == [0.1, 0.2]
    tree = ts.resolve({"preset": "paper", "task": {"env": "tree", "tree": {"depth": 3, "branching": 3}}})
    assert tree.task.tree.depth == 3 and tree.task.tree.model_dump() == {"depth": 3, "branching": 3}
    for name in ts.PRESETS:
        ts.resolve({"preset": name})
    for path in (ROOT / "experiments" / "configs").glob("*.toml"):
        ts.load_config(path)


def test_plans_and_audit_tables_parse_as_before():
    """Plan hashes are computed from the parsed plan: the safe loader must read shipped plans exactly as
    PyYAML's ``safe_load`` did, and audit tables as before (no booleans)."""
    import yaml

    from tabsim.files.safeload import load_yaml

    plans = sorted((ROOT / "preregistration").glob("*/plan.yaml"))
    assert plans
    for path in plans:
        assert load_yaml(path, schema="yaml11") == yaml.safe_load(path.read_text())
    class NoBool(yaml.SafeLoader):  # how audit tables were read: YAML 1.1 without booleans
        yaml_implicit_resolvers = {k: [(t, r) for t, r in v if t != "tag:yaml.org,2002:bool"]
                                   for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    tables = sorted((ROOT / "experiments" / "audits").glob("*.yaml"))
    assert tables
    for path in tables:
        assert load_yaml(path, schema="nobool") == yaml.load(path.read_text(), Loader=NoBool)  # noqa: S506


def test_real_small_accuracies_are_not_taken_for_fractions(tmp_path):
    from tabsim.audit.schema import load_entries

    tiny_base = tmp_path / "tiny.yaml"
    tiny_base.write_text(audit_yaml(arms="{base: 0.8, random: 1.5, majority: 9.9, true: 12.3}"))
    collapsed = tmp_path / "collapsed.yaml"
    collapsed.write_text(audit_yaml(arms="{base: 9.0, random: 0.5, majority: 8.0, true: 22.9}")
                         .replace("model: M", "model: M2"))
    assert len(load_entries([tiny_base, collapsed])) == 2


def test_arms_written_as_fractions_beside_a_percent_base(tmp_path):
    from tabsim.audit.schema import AuditInputError, load_entries

    p = tmp_path / "f.yaml"
    p.write_text(audit_yaml(arms="{base: 49.4, random: 0.51, majority: 0.552, true: 0.601}"))
    with pytest.raises(AuditInputError, match="look like fractions"):
        load_entries(p)


# -- memory --------------------------------------------------------------------------------------------
def test_memory_estimate_scales_with_the_run():
    import tabsim as ts
    from tabsim.runtime.planning import estimate_bytes

    cfg = ts.resolve({"preset": "paper", "task": {"n_prompts": 20000}})
    one = estimate_bytes(cfg, 1, 8)
    assert estimate_bytes(cfg, 4, 8) == pytest.approx(4 * one, rel=1e-6)
    assert estimate_bytes(cfg, 1, 16) == pytest.approx(2 * one, rel=1e-6)
    # the policy tables dominate: at least 8 float32 copies of [conditions x seeds x arms, N, K]
    assert one >= 8 * 4 * 8 * 4 * 20000 * 8
    adam = ts.resolve({"preset": "paper", "task": {"n_prompts": 20000}, "algo": {"optimizer": "adam"}})
    offline = ts.resolve({"preset": "paper", "task": {"n_prompts": 20000},
                          "arms": {"arms": ["frozen", "majority_offline"]}})
    assert estimate_bytes(adam, 1, 8) > one
    assert estimate_bytes(offline, 1, 8) > estimate_bytes(cfg, 1, 8) / 2  # half the arms, m = 64 samples more


def test_check_memory_names_the_estimate_and_the_knobs():
    import tabsim as ts
    from tabsim.runtime.planning import RUNTIME_BYTES, check_memory, estimate_bytes

    cfg = ts.resolve({"preset": "paper", "task": {"n_prompts": 20000}, "sweep": {"lr": [0.01, 0.02, 0.04, 0.08]}})
    one = estimate_bytes(cfg, 1, 8)
    check_memory(cfg, 4, 8, available=RUNTIME_BYTES + 4 * one)  # fits
    with pytest.raises(ts.ConfigError) as err:
        check_memory(cfg, 4, 8, available=RUNTIME_BYTES + 2 * one + 1)
    assert "GiB" in str(err.value) or "MiB" in str(err.value)
    assert "train.chunk_conditions = 2" in str(err.value)
    with pytest.raises(ts.ConfigError) as err:
        check_memory(cfg, 1, 8, available=RUNTIME_BYTES + one // 2)
    msg = str(err.value)
    assert "train.seeds" in msg and "task.n_prompts" in msg and "available" in msg
    # not even one seed fits: the message says how many prompts would (it advised "train.seeds <= 0 fit")
    single = estimate_bytes(cfg, 1, 1)
    with pytest.raises(ts.ConfigError) as err:
        check_memory(cfg, 1, 8, available=RUNTIME_BYTES + single // 2)
    msg = str(err.value)
    assert "<= 0" not in msg and "even one seed needs" in msg
    n = int(msg.split("task.n_prompts <= ")[1].split(" ")[0])
    assert 0 < n < 20000
    small = ts.resolve({"preset": "paper", "task": {"n_prompts": n}})
    assert estimate_bytes(small, 1, 1) <= single // 2 < estimate_bytes(
        ts.resolve({"preset": "paper", "task": {"n_prompts": n + 1}}), 1, 1)
    with pytest.raises(ts.ConfigError, match="runtime alone"):
        check_memory(cfg, 1, 8, available=RUNTIME_BYTES // 2)


def test_run_is_refused_before_compiling_and_chunks_shrink_to_fit(monkeypatch):
    import tabsim as ts
    from tabsim.runtime import memory, planning
    from tabsim.runtime import run as api

    cfg = ts.resolve({"preset": "paper", "task": {"n_prompts": 20000}, "train": {"seeds": 2, "steps": 2},
                      "sweep": {"lr": [0.01, 0.02, 0.04, 0.08]}})
    one = planning.estimate_bytes(cfg, 1, 2)
    monkeypatch.setattr(memory, "available_bytes", lambda: planning.RUNTIME_BYTES + 2 * one + 1)
    assert planning.conditions_per_chunk(cfg, 4, 2) == 2  # the default chunk shrinks to what fits

    def never(*a, **k):
        raise AssertionError("a chunk ran")

    monkeypatch.setattr(api, "run_chunk", never)
    with pytest.raises(ts.ConfigError, match="train.chunk_conditions = 2"):
        ts.run(cfg, train={"chunk_conditions": 4})
    monkeypatch.setattr(memory, "available_bytes", lambda: planning.RUNTIME_BYTES + one // 2)
    with pytest.raises(ts.ConfigError, match="memory: one condition"):
        ts.run(cfg)


# -- the loaders ----------------------------------------------------------------------------------------
def test_loaders_refuse_fast_with_the_file_named(tmp_path, capsys):
    from tabsim.files.safeload import LoadError, load_toml, load_yaml

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    deep = tmp_path / "deep.yaml"
    _deep_yaml(deep)
    deep_toml = tmp_path / "deep.toml"
    _deep_toml(deep_toml)
    for path, load, word in ((bomb, load_yaml, "alias"), (deep, load_yaml, "deep"), (deep_toml, load_toml, "deep")):
        t0 = time.perf_counter()
        with pytest.raises(LoadError) as err:
            load(path)
        print(f"{path.name}: refused in {time.perf_counter() - t0:.4f} s")
        assert str(path) in str(err.value) and word in str(err.value) and "\n" not in str(err.value)
    many = tmp_path / "aliases.yaml"  # many cheap aliases: refused by count, not by size
    many.write_text("a: &a 1\nb: [" + ", ".join(["*a"] * 1001) + "]\n")
    with pytest.raises(LoadError, match="too many YAML aliases"):
        load_yaml(many)
    ok = tmp_path / "ok.yaml"
    ok.write_text("a: &x [1, 2]\nb: *x\n")
    assert load_yaml(ok) == {"a": [1, 2], "b": [1, 2]}
