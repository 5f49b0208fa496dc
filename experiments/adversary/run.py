"""An adversary's tour of tabsim: about 300 bad inputs and faults, each run as a real command.

    python experiments/adversary/run.py                 # every category, 2 at a time
    python experiments/adversary/run.py --only audit    # one category
    python experiments/adversary/run.py --jobs 1 -v     # one at a time, every case printed
    python experiments/adversary/run.py --only config --match expected   # the cases whose name has "expected"

Each case is a ``tabsim`` command (``python -m tabsim.cli``) in its own scratch folder, with a time
limit. What it did is read from its exit code, its standard error and the files it left:

* ``refused``   exit 1 or 2, a message, no traceback (what bad input should get);
* ``accepted``  exit 0 (what good input should get; a post-check may still find bad data);
* ``traceback`` a Python traceback or an exit code other than 0, 1, 2, 130;
* ``hang``      still running at the time limit (killed).

Against what each case expects (``refuse``, ``accept`` or ``any``: either is right), a case is
``ok``, a ``silent accept`` (bad input ran), a ``wrong refusal`` (good input refused), a ``hang``, a
``traceback`` or ``corrupt`` (a post-check found published data that differs from an honest run's).
The table of counts per category is printed at the end, and every case that is not ``ok`` is listed.

Categories: config (fields, values and files of a run config), outputs (``--out``, ``--overwrite``,
``--resume`` and tampered checkpoints), prereg (forged plans, locks, amendments and results), audit
(published tables), dask (executor options and addresses that are not schedulers), limits (runs
beyond memory or reason).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 90.0

BASE = {"": {"preset": '"paper"'}, "task": {"n_prompts": "6"},
        "train": {"steps": "3", "seeds": "2", "batch_size": "4", "group_size": "4", "eval_every": "3"}}


def toml(**sections) -> str:
    merged = {s: dict(v) for s, v in BASE.items()}
    for sec, kv in sections.items():
        for k, v in kv.items():
            if v is None:
                merged.setdefault(sec, {}).pop(k, None)
            else:
                merged.setdefault(sec, {})[k] = v
    lines = [f"{k} = {v}" for k, v in merged.pop("").items()]
    for sec, kv in merged.items():
        lines.append(f"[{sec}]")
        lines += [f"{k} = {v}" for k, v in kv.items()]
    return "\n".join(lines) + "\n"


@dataclasses.dataclass
class Case:
    category: str
    name: str
    args: list  # the tabsim arguments; "{d}" is the case's folder
    expect: str = "refuse"  # refuse | accept | any
    files: dict = dataclasses.field(default_factory=dict)  # name -> text or bytes, written into the folder
    setup: Callable | None = None  # setup(folder) before the command (after files)
    check: Callable | None = None  # check(folder, proc) -> None or a string saying what is corrupt
    timeout: float = TIMEOUT


# ------------------------------------------------------------------------------------------------
# config: every field of a run config given values of the wrong kind


COUNTS = {"task": ["n_prompts", "n_answers", "n_correct"], "arms": ["offline_samples"],
          "algo": ["epochs", "minibatches"],
          "train": ["steps", "batch_size", "group_size", "eval_every", "seeds", "chunk_conditions"]}
UNIT_FLOATS = {"task": ["prior_strength", "format_boost"], "arms": ["gamma", "fpr", "fnr"],
               "algo": ["eps_low", "eps_high"]}
FLOATS = {"algo": ["lr", "beta", "std_eps", "dual_clip_c", "ent_coef", "max_grad_norm"]}
NAMES = {"arms": ["tie"], "algo": ["estimator", "ratio", "surrogate", "aggregation", "kl", "optimizer"],
         "train": ["rng", "dynamics"], "task": ["env"]}


def config_cases() -> list[Case]:
    out = []

    def add(name, text, expect="refuse", ext="toml"):
        out.append(Case("config", name, ["run", "{d}/cfg." + ext, "--out", "{d}/o", "-q"], expect,
                        files={"cfg." + ext: text}))

    for sec, fields in COUNTS.items():
        for f in fields:
            for label, v in [("string", '"3"'), ("negative", "-2"), ("float", "2.5"), ("bool", "true"),
                             ("list", "[2, 3]"), ("nan", "nan"), ("huge", "1e300")]:
                add(f"{sec}.{f}={label}", toml(**{sec: {f: v}}))
    for sec, fields in UNIT_FLOATS.items():
        for f in fields:
            for label, v in [("string", '"0.5"'), ("nan", "nan"), ("inf", "inf"), ("above-1", "1.5"),
                             ("negative", "-0.1"), ("table", "{a = 1}")]:
                loose = label == "above-1" and f in ("format_boost", "eps_low", "eps_high")  # not probabilities
                add(f"{sec}.{f}={label}", toml(**{sec: {f: v}}), "any" if loose else "refuse")
    for sec, fields in FLOATS.items():
        for f in fields:
            for label, v in [("string", '"0.1"'), ("nan", "nan"), ("inf", "inf"), ("negative", "-1.0"),
                             ("list", "[0.1]")]:
                add(f"{sec}.{f}={label}", toml(**{sec: {f: v}}), "refuse" if label != "negative" or f != "ent_coef"
                    else "any")
    for sec, fields in NAMES.items():
        for f in fields:
            for label, v in [("unknown", '"nonsense"'), ("number", "3"), ("empty", '""'), ("case", '"GRPO"')]:
                add(f"{sec}.{f}={label}", toml(**{sec: {f: v}}))
    # the whole file
    add("empty-file", "")
    add("comments-only", "# nothing here\n")
    add("not-toml", "preset = = paper\n")
    add("duplicate-key", toml() + "[task]\nn_prompts = 7\n")
    add("unknown-section", toml(bogus={"x": "1"}))
    add("unknown-field", toml(task={"n_promtps": "6"}))
    add("unknown-preset", toml(**{"": {"preset": '"nope"'}}))
    add("seed-without-seeds", toml(train={"seeds": None, "seed": "2"}), "any")
    add("arms-empty-list", toml(arms={"arms": "[]"}))
    add("arms-duplicate", toml(arms={"arms": '["true", "true"]'}))
    add("arms-unknown", toml(arms={"arms": '["true", "oracle"]'}))
    add("sweep-empty-list", toml(sweep={"prior_strength": "[]"}))
    add("sweep-unknown-field", toml(sweep={"n_colours": "[1, 2]"}))
    add("sweep-strings", toml(sweep={"prior_strength": '["a", "b"]'}))
    add("sweep-nan", toml(sweep={"prior_strength": "[0.2, nan]"}))
    add("batch-above-prompts", toml(train={"batch_size": "64"}))
    add("correct-above-answers", toml(task={"n_answers": "4", "n_correct": "9"}))
    add("tree-unknown-field", toml(task={"env": '"tree"', "tree": "{deep = 3}"}))
    add("tree-depth-zero", toml(task={"env": '"tree"', "tree": "{depth = 0}"}))
    add("yaml-empty-section", "preset: paper\ntrain:\ntask:\n  n_prompts: 6\n", ext="yaml")
    add("yaml-python-tag", "preset: !!python/object/apply:os.system ['true']\n", ext="yaml")
    add("yaml-two-docs", "preset: paper\n---\npreset: grpo\n", ext="yaml")
    add("yaml-duplicate-key", "preset: paper\npreset: grpo\n", ext="yaml")
    add("yaml-alias-bomb", "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"b{i}: &b{i} [" + ", ".join([f"*{'a' if i == 0 else f'b{i - 1}'}"] * 9) + "]\n" for i in range(9))
        + "train:\n  seeds: *b8\n", ext="yaml")
    add("yaml-deep", "a: " + "[" * 5000 + "]" * 5000 + "\n", ext="yaml")
    add("yaml-list-top", "- preset: paper\n", ext="yaml")
    add("yaml-yes-bool", "preset: paper\ntrain:\n  replacement: yes\n", "any", ext="yaml")
    add("toml-deep", "a = " + "[" * 3000 + "]" * 3000 + "\n")
    add("binary", "\x00\x01\x02preset")
    out.append(Case("config", "not-utf8", ["run", "{d}/cfg.toml", "--out", "{d}/o", "-q"],
                    files={"cfg.toml": b"preset = \"p\xe9per\"\n"}))
    out.append(Case("config", "huge-file", ["run", "{d}/cfg.toml", "--out", "{d}/o", "-q"],
                    files={"cfg.toml": "# " + "x" * 60_000_000 + "\n"}))
    out.append(Case("config", "missing-file", ["run", "{d}/none.toml", "--out", "{d}/o", "-q"]))
    out.append(Case("config", "a-folder", ["run", "{d}", "--out", "{d}/o", "-q"]))
    out.append(Case("config", "wrong-extension", ["run", "{d}/cfg.ini", "--out", "{d}/o", "-q"],
                    files={"cfg.ini": '[train]\nsteps = 4\n'}))
    # a run's own config.json is a config: `.json` is accepted since
    out.append(Case("config", "json-config", ["run", "{d}/cfg.json", "--out", "{d}/o", "-q"], "accept",
                    files={"cfg.json": '{"preset": "paper", "train": {"steps": 4, "seeds": 2}}'}))
    # --set on reproduce: an unknown key, a value the studies set themselves, a bad value, a list holding
    # the TRUE arm without the partition's other arms; all refused before anything runs
    for name, kv in (("unknown-key", "algo.learning_rate=0.1"), ("study-prior", "task.prior_strength=0.3"),
                     ("study-steps", "train.steps=5"), ("sweep", "sweep.lr=[0.1,0.2]"), ("bad-value", "algo.lr=-1"),
                     ("arms", "arms.arms=[frozen,true]"), ("no-pass1", "train.metrics=[entropy]"),
                     ("expected", "train.dynamics=expected")):
        out.append(Case("config", f"reproduce-set-{name}", ["reproduce", "--out", "{d}/o", "-q", "--set", kv]))
    add("good-config", toml(), "accept")
    # expected dynamics: what has no exact flow is refused with the reason, the rest runs
    exp = {"dynamics": '"expected"'}
    add("expected-dynamics-typo", toml(train={"dynamics": '"exact"'}))
    add("expected-adam", toml(train=exp, algo={"optimizer": '"adam"'}))
    add("expected-grad-clip", toml(train=exp, algo={"max_grad_norm": "1.0"}))
    add("expected-tree", toml(train=exp, task={"env": '"tree"'}))
    add("expected-huge-group", toml(train={**exp, "group_size": "40"}, task={"n_answers": "8"}))
    add("expected-reinforce-pp-kl-in-reward", toml(**{"": {"preset": '"reinforce_pp"'}}, train=exp))
    add("expected-gpg-reuse", toml(**{"": {"preset": '"gpg"'}}, train=exp, algo={"epochs": "2"}))
    add("expected-gpg-batch-too-large", toml(**{"": {"preset": '"gpg"'}}, train={**exp, "batch_size": "64"},
                                              task={"n_prompts": "200"}))
    add("expected-reuse-replacement", toml(train={**exp, "replacement": "true"}, algo={"epochs": "2"}))
    add("expected-paper", toml(train=exp), "accept")
    add("expected-gpg", toml(**{"": {"preset": '"gpg"'}}, train=exp), "accept")
    add("expected-reinforce-pp-baseline", toml(train=exp, algo={"estimator": '"reinforce_pp_baseline"'}), "accept")
    # the sweep command's own options
    for label, opt in [("empty-vary", "prior_strength="), ("double-comma", "prior_strength=0.1,,0.2"),
                       ("no-equals", "prior_strength"), ("unknown", "colour=1,2"), ("nan", "lr=nan"),
                       ("strings", "lr=a,b")]:
        out.append(Case("config", f"sweep-vary-{label}",
                        ["sweep", "--vary", opt, "--steps", "2", "--seeds", "2", "--out", "{d}/o", "-q"]))
    for label, arms in [("empty", ""), ("double-comma", "frozen,,true"), ("unknown", "frozen,oracle"),
                        ("spaces", " , ")]:
        out.append(Case("config", f"sweep-arms-{label}",
                        ["sweep", "--arms", arms, "--steps", "2", "--seeds", "2", "--out", "{d}/o", "-q"]))
    for label, v in [("zero", "0"), ("negative", "-1"), ("float", "1.5"), ("text", "two")]:
        out.append(Case("config", f"sweep-seeds-{label}",
                        ["sweep", "--seeds", v, "--steps", "2", "--out", "{d}/o", "-q"]))
    out.append(Case("config", "sweep-unknown-preset", ["sweep", "--preset", "nope", "--out", "{d}/o", "-q"]))
    return out


# ------------------------------------------------------------------------------------------------
# outputs and resume


SLOW = toml(task={"n_prompts": "16"}, train={"steps": "800", "seeds": "2", "batch_size": "8", "eval_every": "800",
                                             "chunk_conditions": "1"},
            sweep={"prior_strength": "[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]"})


def _tabsim(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tabsim.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, **kw)


def _killed_run(d: Path, chunks: int = 2) -> None:
    """A run of SLOW into d/o, killed (SIGKILL) once ``chunks`` chunks are in its staging folder."""
    (d / "slow.toml").write_text(SLOW)
    proc = subprocess.Popen([sys.executable, "-m", "tabsim.cli", "run", str(d / "slow.toml"), "--out", str(d / "o"),
                             "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    while time.monotonic() - t0 < TIMEOUT:
        if _saved(d) >= chunks or proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _saved(d: Path) -> int:
    from tabsim.runtime.chunklog import saved_chunks

    return sum(saved_chunks(c) for c in d.glob(".*/chunks"))


def _chunks(d: Path) -> list[dict]:
    """The manifest lines of the staging folder in ``d`` (each with ``dir``: its chunks folder), by offset."""
    out = []
    for c in d.glob(".*/chunks"):
        try:
            lines = (c / "manifest.jsonl").read_text().splitlines()[1:]
        except OSError:
            continue
        out += [{**json.loads(ln), "dir": c} for ln in lines if ln.endswith("}")]
    return sorted(out, key=lambda e: e["offset"])


def _bytes(e: dict) -> bytes:
    return (e["dir"] / "chunks.pack").read_bytes()[e["offset"]:e["offset"] + e["size"]]


def _forge(e: dict, data: bytes) -> None:
    """Append ``data`` to the pack and a manifest line naming it chunk ``e`` (with its SHA-256: the manifest agrees)."""
    import hashlib

    pack = e["dir"] / "chunks.pack"
    line = {k: v for k, v in e.items() if k != "dir"}
    line.update(offset=pack.stat().st_size, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    with open(pack, "ab") as fh:
        fh.write(data)
    with open(e["dir"] / "manifest.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")


_REFERENCE: dict = {}
_REF_LOCK = threading.Lock()


def _reference_bytes() -> bytes:
    with _REF_LOCK:
        if "slow" not in _REFERENCE:
            d = Path(tempfile.mkdtemp(prefix="adv-ref-"))
            (d / "slow.toml").write_text(SLOW)
            r = _tabsim("run", d / "slow.toml", "--out", d / "o", "-q")
            assert r.returncode == 0, r.stderr
            _REFERENCE["slow"] = (d / "o" / "results.parquet").read_bytes()
        return _REFERENCE["slow"]


def _same_as_reference(d: Path, proc) -> str | None:
    if proc.returncode != 0:
        return None  # refused: nothing published, nothing to compare
    got = (d / "o" / "results.parquet").read_bytes()
    return None if got == _reference_bytes() else "published results differ from an uninterrupted run's"


def _tamper_copy(d: Path):
    _killed_run(d, 3)
    c = _chunks(d)
    if len(c) >= 2:
        _forge(c[1], _bytes(c[0]))


def _tamper_pass1(d: Path):
    import pyarrow as pa

    _killed_run(d, 2)
    c = _chunks(d)
    if c:
        t = pa.ipc.open_stream(_bytes(c[0])).read_all()
        meta = t.schema.metadata
        col = t.column("pass1").to_pylist()
        t = t.set_column(t.schema.get_field_index("pass1"), "pass1", [[v * 1.5 for v in col]])
        t = t.replace_schema_metadata(meta)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        _forge(c[0], sink.getvalue().to_pybytes())


def _tamper_truncate(d: Path):
    _killed_run(d, 2)
    c = _chunks(d)
    if c:
        pack = c[0]["dir"] / "chunks.pack"
        pack.write_bytes(pack.read_bytes()[:200])


def _tamper_foreign(d: Path):
    """A chunk of another config's run put into this run's staging folder."""
    other = d / "other"
    other.mkdir()
    (other / "slow.toml").write_text(SLOW.replace("prior_strength = [0.2", "prior_strength = [0.25"))
    proc = subprocess.Popen([sys.executable, "-m", "tabsim.cli", "run", str(other / "slow.toml"), "--out",
                             str(other / "o"), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    while time.monotonic() - t0 < TIMEOUT and not _saved(other) and proc.poll() is None:
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _killed_run(d, 2)
    mine, theirs = _chunks(d), _chunks(other)
    if mine and theirs:
        _forge(mine[0], _bytes(theirs[0]))


def _tamper_delete_manifest(d: Path):
    _killed_run(d, 2)
    for p in d.glob(".*/chunks/manifest.jsonl"):
        p.unlink()


def output_cases() -> list[Case]:
    tiny = ["sweep", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "4", "-q"]
    out = [
        Case("outputs", "out-empty", tiny + ["--out", ""]),
        Case("outputs", "out-is-a-file", tiny + ["--out", "{d}/f"], files={"f": "keep me"},
             check=lambda d, p: None if (d / "f").read_text() == "keep me" else "the file was changed"),
        Case("outputs", "out-nonempty-no-flag", tiny + ["--out", "{d}/o"], files={"o/old.txt": "old"},
             check=lambda d, p: None if (d / "o" / "old.txt").read_text() == "old" else "old results lost"),
        Case("outputs", "out-in-proc", tiny + ["--out", "/proc/tabsim-out"]),
        Case("outputs", "overwrite-and-resume", tiny + ["--out", "{d}/o", "--overwrite", "--resume"]),
        Case("outputs", "resume-nothing", tiny + ["--out", "{d}/o", "--resume"], "any"),
        Case("outputs", "out-dotdot", tiny + ["--out", "{d}/.."], "refuse"),
        Case("outputs", "out-root", tiny + ["--out", "/"], "refuse"),
        Case("outputs", "overwrite-ok", tiny + ["--out", "{d}/o", "--overwrite"], "accept", files={"o/old.txt": "x"}),
        Case("outputs", "figure-format-unknown", tiny + ["--out", "{d}/o", "--figure-format", "bmp"]),
    ]
    for name, setup in [("resume-after-kill", lambda d: _killed_run(d, 2)), ("chunk-copied-over", _tamper_copy),
                        ("chunk-pass1-edited", _tamper_pass1), ("chunk-truncated", _tamper_truncate),
                        ("chunk-from-other-run", _tamper_foreign), ("manifest-deleted", _tamper_delete_manifest)]:
        out.append(Case("outputs", name, ["run", "{d}/slow.toml", "--out", "{d}/o", "-q", "--resume"], "any",
                        setup=setup, check=_same_as_reference, timeout=180))
    return out


# ------------------------------------------------------------------------------------------------
# prereg: forged plans, locks, amendments and results


PLAN = ROOT / "preregistration" / "clipping_null" / "plan.yaml"


def _small_plan(d: Path) -> Path:
    import yaml

    doc = yaml.safe_load(PLAN.read_text())
    doc["design"].update(seeds=8, steps=20)
    doc["analysis"]["power"]["n_seeds"] = 8
    (d / "study").mkdir(exist_ok=True)
    path = d / "study" / "plan.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _locked(d: Path, signed: bool = True) -> Path:
    plan = _small_plan(d)
    if signed:
        r = _tabsim("prereg", "keygen", "--out", d / "key")
        assert r.returncode == 0, r.stderr
        r = _tabsim("prereg", "lock", plan, "--key", d / "key")
    else:
        r = _tabsim("prereg", "lock", plan)
    assert r.returncode == 0, r.stderr
    return plan


def _ran(d: Path, signed: bool = True) -> Path:
    plan = _locked(d, signed)
    args = ["prereg", "run", plan, "--out", d / "res", "-q"] + (["--key", d / "key"] if signed else [])
    r = _tabsim(*args)
    assert r.returncode == 0, r.stderr
    return plan


def _edit_json(path: Path, fn):
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc, indent=2))


def _flip_verdict(d: Path):
    _ran(d)

    def flip(doc):
        hyps = doc.get("analysis", {}).get("hypotheses", [])
        for h in hyps:
            h["verdict"] = "NOT SUPPORTED" if h.get("verdict") == "SUPPORTED" else "SUPPORTED"
    _edit_json(d / "res" / "results.json", flip)


def _edit_data(d: Path):
    import pandas as pd

    _ran(d)
    f = pd.read_parquet(d / "res" / "data.parquet")
    f["pass1"] = f["pass1"] * 0.5
    f.to_parquet(d / "res" / "data.parquet")


def _strip_signature(d: Path):
    _ran(d)
    for p in (d / "res").glob("*.sig"):
        p.unlink()
    _edit_json(d / "res" / "status.json", lambda doc: doc.pop("signature", None))


def _more_steps(plan: Path):
    plan.write_text(plan.read_text().replace("steps: 20", "steps: 21"))


def _edit_plan_after_lock(d: Path):
    plan = _locked(d)
    _more_steps(plan)


def _future_lock(d: Path):
    plan = _locked(d, signed=False)
    lock = Path(str(plan).replace(".yaml", ".lock.json"))
    if not lock.exists():
        lock = next(plan.parent.glob("*.lock.json"))
    _edit_json(lock, lambda doc: doc.update(locked_at_utc="2099-01-01T00:00:00+00:00"))


def _unsigned_amendment(d: Path):
    plan = _locked(d)
    _more_steps(plan)
    r = _tabsim("prereg", "amend", plan, "--reason", "more seeds")
    (d / "amend.txt").write_text(r.stdout + r.stderr)


def _forged_lock_hash(d: Path):
    plan = _locked(d, signed=False)
    _more_steps(plan)
    lock = next(plan.parent.glob("*.lock.json"))
    import hashlib

    _edit_json(lock, lambda doc: doc.update(sha256=hashlib.sha256(b"forged").hexdigest()))


def prereg_cases() -> list[Case]:
    pub = "{d}/key.pub"
    return [
        Case("prereg", "validate-plan-edited-after-lock", ["prereg", "validate", "{d}/study/plan.yaml"],
             setup=_edit_plan_after_lock),
        Case("prereg", "run-plan-edited-after-lock", ["prereg", "run", "{d}/study/plan.yaml", "--out", "{d}/r", "-q"],
             setup=_edit_plan_after_lock),
        Case("prereg", "run-lock-from-the-future", ["prereg", "run", "{d}/study/plan.yaml", "--out", "{d}/r", "-q"],
             setup=_future_lock),
        Case("prereg", "validate-unsigned-amendment", ["prereg", "validate", "{d}/study/plan.yaml", "--public-key", pub],
             setup=_unsigned_amendment),
        Case("prereg", "run-unsigned-amendment",
             ["prereg", "run", "{d}/study/plan.yaml", "--out", "{d}/r", "-q", "--public-key", pub],
             setup=_unsigned_amendment),
        Case("prereg", "validate-forged-lock-hash", ["prereg", "validate", "{d}/study/plan.yaml"],
             setup=_forged_lock_hash),
        Case("prereg", "report-verdict-flipped", ["prereg", "report", "{d}/res", "--strict", "--public-key", pub],
             setup=_flip_verdict),
        Case("prereg", "report-verdict-flipped-no-key", ["prereg", "report", "{d}/res", "--strict"],
             setup=_flip_verdict),
        Case("prereg", "report-data-edited", ["prereg", "report", "{d}/res", "--strict", "--public-key", pub],
             setup=_edit_data),
        Case("prereg", "report-signature-stripped", ["prereg", "report", "{d}/res", "--strict", "--public-key", pub],
             setup=_strip_signature),
        Case("prereg", "report-signature-stripped-no-key", ["prereg", "report", "{d}/res", "--strict"],
             setup=_strip_signature),
        Case("prereg", "report-honest", ["prereg", "report", "{d}/res", "--strict", "--public-key", pub], "accept",
             setup=_ran),
        Case("prereg", "validate-not-yaml", ["prereg", "validate", "{d}/p.yaml"], files={"p.yaml": "a: [\n"}),
        Case("prereg", "validate-empty", ["prereg", "validate", "{d}/p.yaml"], files={"p.yaml": ""}),
        Case("prereg", "validate-python-tag", ["prereg", "validate", "{d}/p.yaml"],
             files={"p.yaml": "title: !!python/name:os.system\n"}),
        Case("prereg", "lock-twice", ["prereg", "lock", "{d}/study/plan.yaml"], setup=lambda d: _locked(d, False)),
        Case("prereg", "keygen-over-existing", ["prereg", "keygen", "--out", "{d}/k"], files={"k": "precious"},
             check=lambda d, p: None if (d / "k").read_text() == "precious" else "a key file was overwritten"),
        Case("prereg", "report-missing-folder", ["prereg", "report", "{d}/nothing"]),
        Case("prereg", "public-key-garbage", ["prereg", "validate", str(PLAN), "--public-key", "{d}/g.pub"],
             files={"g.pub": "not a key"}),
    ]


# ------------------------------------------------------------------------------------------------
# audit tables


AUDIT_ENTRY = {"model": "M", "benchmark": "MATH-500", "samples_per_item": "greedy", "values": "absolute",
               "gamma": "0.5", "majority_kind": "online"}
AUDIT_ARMS = {"base": "49.4", "random": "51.0", "majority": "55.2", "true": "60.2"}


def audit_yaml(entry: dict | None = None, arms: dict | None = None, extra: str = "") -> str:
    e = {**AUDIT_ENTRY, **(entry or {})}
    a = {**AUDIT_ARMS, **(arms or {})}
    lines = ["source: {id: t, paper: P, table: T1}", extra, "entries:", "  - " + "\n    ".join(
        [f"{k}: {v}" for k, v in e.items() if v is not None]
        + ["arms: {" + ", ".join(f"{k}: {v}" for k, v in a.items() if v is not None) + "}"])]
    return "\n".join(line for line in lines if line) + "\n"


CSV_HEADER = ("source_id,paper,table,model,benchmark,n_items,samples_per_item,values,gamma,majority_kind,"
              "base,random,majority,true\n")


def audit_cases() -> list[Case]:
    out = []

    def add(name, text, expect="refuse", ext="yaml"):
        out.append(Case("audit", name, ["audit", "{d}/t." + ext, "--out", "{d}/o", "--no-calibration", "-q"],
                        expect, files={"t." + ext: text}))

    add("good", audit_yaml(), "accept")
    add("good-csv", CSV_HEADER + "t,P,T1,M,MATH-500,500,greedy,absolute,0.5,online,49.4,51.0,55.2,60.2\n", "accept", "csv")
    for arm in AUDIT_ARMS:
        for label, v in [("negative", "-3"), ("above-100", "130"), ("string", '"high"'), ("nan", ".nan"),
                         ("nested-list", "[[50, 51]]"), ("fraction-among-percents", "0.5")]:
            add(f"arm-{arm}-{label}", audit_yaml(arms={arm: v}))
    for label, v in [("zero", "0"), ("one-with-49.4", "1"), ("negative", "-500"), ("string", '"500"'),
                     ("float", "500.5"), ("contradicts-registry", "5000")]:
        add(f"n_items-{label}", audit_yaml(entry={"n_items": v}))
    add("n_items-override", audit_yaml(entry={"n_items": "5000", "n_items_override": '"a larger split"'}), "accept")
    add("unknown-benchmark-no-count", audit_yaml(entry={"benchmark": "MyBench"}))
    add("unknown-benchmark-with-count", audit_yaml(entry={"benchmark": "MyBench", "n_items": "250"}), "accept")
    add("aime-impossible-greedy", audit_yaml(entry={"benchmark": "AIME 2024"},
                                             arms={"base": "7.7", "random": "10.0", "majority": "13.3",
                                                   "true": "16.7"}), "any")
    for label, v in [("unknown", "best@3"), ("avg-no-k", "avg@"), ("avg-zero", "avg@0"), ("number", "8")]:
        add(f"protocol-{label}", audit_yaml(entry={"samples_per_item": v}))
    add("avg8", audit_yaml(entry={"samples_per_item": "avg@8"}), "accept")
    add("gamma-above-1", audit_yaml(entry={"gamma": "1.5"}))
    add("gamma-string", audit_yaml(entry={"gamma": "half"}))
    add("majority-kind-unknown", audit_yaml(entry={"majority_kind": "psychic"}))
    add("values-unknown", audit_yaml(entry={"values": "relative"}))
    add("unicode-minus-gain", audit_yaml(entry={"values": "gains"}, arms={"base": "49.4", "random": "\u22124.9",
                                                                         "majority": "5.8", "true": "10.8"}), "accept")
    add("percent-signs", audit_yaml(arms={"base": '"49.4%"', "random": '"51.0%"', "majority": '"55.2%"',
                                          "true": '"60.2%"'}), "accept")
    add("dash-missing", audit_yaml(arms={"random": '"\u2014"'}), "accept")
    add("all-fractions-undeclared", audit_yaml(arms={"base": "0.494", "random": "0.51", "majority": "0.552",
                                                     "true": "0.602"}))
    add("all-fractions-declared", audit_yaml(arms={"base": "0.494", "random": "0.51", "majority": "0.552",
                                                   "true": "0.602"}, entry={"scale": "fraction"}), "accept")
    add("no-arms", audit_yaml(arms={k: None for k in AUDIT_ARMS}))
    add("only-base", audit_yaml(arms={"random": None, "majority": None, "true": None}), "any")
    add("per-seed-lists", audit_yaml(arms={"random": "[50.8, 51.0, 51.4]", "true": "[60.0, 60.2, 60.4]"}), "accept")
    add("unknown-arm", audit_yaml(arms={"oracle": "70"}))
    add("unknown-entry-field", audit_yaml(entry={"temperature": "0.6"}))
    add("no-entries", "source: {id: t, paper: P, table: T1}\nentries: []\n")
    add("no-source", "entries:\n  - model: M\n")
    add("empty-yaml", "")
    add("python-tag", "source: !!python/object/apply:os.system ['true']\n")
    add("formula-model-name", audit_yaml(entry={"model": '"=HYPERLINK(\\"http://x\\")"'}), "accept")
    add("pipe-newline-model-name", audit_yaml(entry={"model": '"a|b\\nc"'}), "accept")
    add("csv-header-only", CSV_HEADER, "refuse", "csv")
    add("csv-row-short", CSV_HEADER + "t,P,T1,M,MATH-500,500,greedy,absolute,0.5,online,49.4,51.0,55.2\n", "refuse", "csv")
    add("csv-row-long", CSV_HEADER + "t,P,T1,M,MATH-500,500,greedy,absolute,0.5,online,49.4,51.0,55.2,60.2,99\n", "refuse", "csv")
    add("csv-empty", "", "refuse", "csv")
    add("csv-binary", "\x00\x01,\x02\n", "refuse", "csv")
    add("csv-pass1-header", CSV_HEADER.replace("base,", "pass@1 base,") +
        "t,P,T1,M,MATH-500,500,greedy,absolute,0.5,online,49.4,51.0,55.2,60.2\n", "any", "csv")
    add("csv-gains-no-values", CSV_HEADER.replace(",values", "", 1) + "t,P,T1,M,MATH-500,500,greedy,0.5,online,49.4,-4.9,5.8,10.8\n",
        "any", "csv")
    out.append(Case("audit", "missing-file", ["audit", "{d}/none.yaml", "--out", "{d}/o", "-q"]))
    out.append(Case("audit", "empty-folder", ["audit", "{d}/in", "--out", "{d}/o", "-q"], setup=lambda d: (d / "in").mkdir()))
    for label, v in [("ci-above-1", ["--ci", "1.5"]), ("ci-zero", ["--ci", "0"]), ("threshold-neg", ["--threshold", "-1"]),
                     ("seed-sd-neg", ["--seed-sd", "-2"]), ("family-unknown", ["--family", "nope"])]:
        out.append(Case("audit", f"option-{label}", ["audit", "{d}/t.yaml", "--out", "{d}/o", "-q", *v],
                        files={"t.yaml": audit_yaml()}))
    return out


# ------------------------------------------------------------------------------------------------
# dask: executor options and addresses that are not schedulers


def _serve(kind: str) -> int:
    """A local listener on a free port: ``http`` answers like a web server, ``silent`` accepts and says
    nothing, ``garbage`` sends random bytes."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]

    def loop():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            if kind == "http":
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                except OSError:
                    pass
                conn.close()
            elif kind == "garbage":
                try:
                    conn.sendall(os.urandom(1 << 16))
                except OSError:
                    pass
            else:
                threading.Timer(600, conn.close).start()

    threading.Thread(target=loop, daemon=True).start()
    return port


def dask_cases() -> list[Case]:
    tiny = ["sweep", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "4", "-q", "--out", "{d}/o"]
    out = [Case("dask", f"scheduler-{k}", tiny + ["--executor", "dask", "--scheduler", f"tcp://127.0.0.1:{{port_{k}}}"],
                timeout=60) for k in ("http", "silent", "garbage")]
    out.append(Case("dask", "scheduler-closed-port", tiny + ["--executor", "dask", "--scheduler", "tcp://127.0.0.1:1"]))
    for label, addr in [("no-scheme", "127.0.0.1:8786"), ("bad-port", "tcp://h:99999"), ("spaces", "tcp://a b:1"),
                        ("empty", ""), ("http-scheme", "http://127.0.0.1:8786")]:
        out.append(Case("dask", f"scheduler-{label}", tiny + ["--executor", "dask", "--scheduler", addr]))
    for label, w in [("zero", "0"), ("negative", "-3"), ("text", "two")]:
        out.append(Case("dask", f"workers-{label}", tiny + ["--executor", "dask", "--workers", w]))
    out.append(Case("dask", "workers-without-dask", tiny + ["--workers", "2"], "any"))
    out.append(Case("dask", "executor-unknown", tiny + ["--executor", "ray"]))
    out.append(Case("dask", "workers-1000", tiny + ["--executor", "dask", "--workers", "1000"], "any", timeout=120))
    return out


# ------------------------------------------------------------------------------------------------
# limits: runs beyond memory or reason


def limit_cases() -> list[Case]:
    out = []

    def add(name, text, expect="refuse"):
        out.append(Case("limits", name, ["run", "{d}/cfg.toml", "--out", "{d}/o", "-q"], expect,
                        files={"cfg.toml": text}, timeout=60))

    add("prompts-1e9", toml(task={"n_prompts": "1000000000"}, train={"batch_size": "16"}))
    add("seeds-1e8", toml(train={"seeds": "100000000"}))
    add("group-1e6", toml(train={"group_size": "1000000"}))
    add("answers-1e6", toml(task={"n_answers": "1000000"}))
    add("sweep-1e6-points", toml(sweep={"prior_strength": "[" + ", ".join(["0.5"] * 200000) + "]"}))
    add("maj-k-huge", toml(train={"maj_k": "[100000]"}))
    add("pass-k-huge", toml(train={"pass_k": "[100000]"}), "any")  # pass@k of the policy is exact for any k
    add("tree-huge", toml(task={"env": '"tree"', "tree": "{depth = 40, branching = 10}"}))
    add("epochs-1e6", toml(algo={"epochs": "1000000"}), "any")
    out.append(Case("limits", "fsize-limit", ["run", "{d}/cfg.toml", "--out", "{d}/o", "-q"], "refuse",
                    files={"cfg.toml": toml(train={"steps": "20", "eval_every": "1"})}, timeout=60))
    return out


CATEGORIES = {"config": config_cases, "outputs": output_cases, "prereg": prereg_cases, "audit": audit_cases,
              "dask": dask_cases, "limits": limit_cases}


# ------------------------------------------------------------------------------------------------
# running and judging


def _write(folder: Path, files: dict) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def _limit_fsize():  # for the fsize-limit case: 4 kB per file
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def run_case(case: Case, scratch: Path, ports: dict) -> dict:
    d = scratch / f"{case.category}-{case.name}"
    d.mkdir(parents=True)
    t0 = time.monotonic()
    row = {"category": case.category, "case": case.name, "expect": case.expect}
    try:
        _write(d, case.files)
        if case.setup is not None:
            case.setup(d)
    except Exception as err:  # the harness itself failed: say so, do not count it as tabsim's
        row.update(outcome="setup failed", verdict="setup failed", seconds=0.0, message=repr(err)[:300])
        return row
    args = [a.format(d=d, **ports) for a in case.args]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    pre = _limit_fsize if case.name == "fsize-limit" else None
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "tabsim.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=d, preexec_fn=pre,
                                start_new_session=True)
    except (OSError, ValueError) as err:  # an argument the OS cannot pass (a NUL byte): not tabsim's
        row.update(outcome="setup failed", verdict="setup failed", seconds=0.0, message=repr(err)[:300])
        return row
    try:
        out, err = proc.communicate(timeout=case.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        row.update(outcome="hang", verdict="hang", seconds=round(time.monotonic() - t0, 1),
                   message=(err or "").strip()[-300:])
        return row
    seconds = round(time.monotonic() - t0, 2)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if "Traceback (most recent call last)" in err or proc.returncode not in (0, 1, 2, 130):
        outcome = "traceback"
    elif proc.returncode == 0:
        outcome = "accepted"
    else:
        outcome = "refused" if lines else "traceback"  # a silent non-zero exit is no refusal
    verdict = "ok"
    if outcome in ("traceback",):
        verdict = "traceback"
    elif outcome == "accepted" and case.expect == "refuse":
        verdict = "silent accept"
    elif outcome == "refused" and case.expect == "accept":
        verdict = "wrong refusal"
    if verdict == "ok" and case.check is not None:
        proc.returncode = proc.returncode  # for the check's reading
        problem = case.check(d, proc)
        if problem:
            verdict = "corrupt"
            lines = [problem] + lines
    row.update(outcome=outcome, verdict=verdict, seconds=seconds, message=" | ".join(lines)[-300:])
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=sorted(CATEGORIES), help="run only this category (repeatable)")
    ap.add_argument("--match", default="", help="run only the cases whose name contains this text")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at the same time (default 2)")
    ap.add_argument("--out", type=Path, default=None, help="write every case's row to this CSV")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case as it ends")
    args = ap.parse_args(argv)
    cases = [c for name, make in CATEGORIES.items() if not args.only or name in args.only for c in make()
             if args.match in c.name]
    if not cases:
        ap.error(f"no case matches --only {args.only} --match {args.match!r}")
    ports = {f"port_{k}": _serve(k) for k in ("http", "silent", "garbage")}
    scratch = Path(tempfile.mkdtemp(prefix="tabsim-adversary-"))
    print(f"{len(cases)} cases in {scratch}", flush=True)
    rows = []
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(lambda c: run_case(c, scratch, ports), cases):
            rows.append(row)
            if args.verbose or row["verdict"] != "ok":
                print(f"  {row['verdict']:>14}  {row['category']}/{row['case']} ({row['outcome']}, {row['seconds']} s)"
                      f"  {row['message'][:160]}", flush=True)
    import pandas as pd

    frame = pd.DataFrame(rows)
    table = frame.pivot_table(index="category", columns="verdict", values="case", aggfunc="count", fill_value=0)
    table["cases"] = table.sum(axis=1)
    table.loc["all"] = table.sum()
    print(f"\n{len(frame)} cases in {time.monotonic() - t0:.0f} s; slowest refusal "
          f"{frame.loc[frame.outcome == 'refused', 'seconds'].max():.1f} s")
    print(table.to_string())
    if args.out:
        frame.to_csv(args.out, index=False)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0 if set(frame["verdict"]) <= {"ok"} else 1


if __name__ == "__main__":
    sys.exit(main())
