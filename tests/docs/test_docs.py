"""Every example in the user documentation runs (docs/*.md and README.md), so none of them rots.

Conventions (also stated in docs/index.md):

* A fenced ```` ```python ```` block is executed; the blocks of one file run in order in one namespace.
* A fenced ```` ```bash ````, ```` ```sh ```` or ```` ```console ```` block holds commands: each line
  that starts with ``tabsim `` (``$ tabsim `` in a console block, where the other lines are output) is
  run in-process through click's ``CliRunner`` and must exit 0. ``&&`` chains, trailing ``# comments``
  and ``\\`` continuations are understood. Lines starting with one of :data:`SKIP_PREFIXES` (installing,
  running the test suite, the benchmark scripts, git) are skipped on purpose; any other line fails
  the test, so a new kind of command has to be added here explicitly.
* A fenced block whose info string names a title (e.g. ```` ```yaml title="study/plan.yaml" ````, the
  attribute pymdownx.superfences shows as the block's caption on the site) is written to that path
  when reached, so later blocks can use it. Other blocks (```` ```text ````, ```` ```yaml ````,
  ```` ```toml ````, ...) are not run.

Each file runs in its own temporary working directory holding copies of the repository's
``experiments/configs``, ``experiments/audits`` and ``preregistration`` folders, so examples may name
those paths and everything they write lands in the temporary folder. The audit calibration cache
(``TABSIM_CACHE``) is a temporary folder shared by the session.

The README's long commands (:data:`HEAVY_COMMANDS`: the full-size ``tabsim reproduce``, the config file
of 200 steps, the audit of every shipped table) run with ``-m heavy``, in the README's run of every
command; its other examples run by default.

The examples of the pages in :data:`HEAVY_PAGES` run with ``-m heavy`` (their commands and functions
have tests of their own in the default suite).

The other tests check that docs/cli.md shows every command with every option, that docs/api.md names
everything the public modules export, and that relative links in the docs point at existing files
and headings.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FILES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
COPIED = ("experiments/configs", "experiments/audits", "preregistration")
RUN_LANGS = {"bash", "sh", "shell", "console"}
# Commands shown in the docs that the tests do not run, and why.
SKIP_PREFIXES = (
    "pip install",  # the package is installed already
    "python -m pytest",  # the test suite itself
    "python experiments/",  # benchmarks and study scripts: minutes of CPU, run by their authors
    "jupytext",  # notebook conversion; tests/docs/test_notebooks.py runs the notebooks
    "git ",  # inspecting history (docs/prereg.md: how to verify a study)
    "lint-imports",  # the import contracts: .ci/run and tests/test_floors.py run them
    "python .ci/",  # the CI scripts: a fresh virtualenv and the whole suite (.ci/run, .ci/floors)
)
FENCE = re.compile(r"^(`{3,})([^`\n]*)$")


def blocks(path: Path) -> list[dict]:
    """Fenced blocks of a markdown file: ``lang``, ``attrs`` (key="value" of the info string), ``text``, ``line``.

    The file an example is written to is ``attrs["title"]``: the caption the site shows above the block.
    """
    out, lines, i = [], path.read_text().splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), shlex.split(m.group(2))
        start, body = i + 1, []
        i += 1
        while i < len(lines) and lines[i].rstrip() != fence:
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{path.name}:{start}: unclosed code fence")
        i += 1
        lang = info[0] if info else ""
        attrs = dict(a.split("=", 1) for a in info[1:] if "=" in a)
        out.append({"lang": lang, "attrs": attrs, "text": "\n".join(body) + "\n", "line": start})
    return out


def commands(block: dict) -> list[tuple[int, str]]:
    """``(line, command)`` of a shell block, continuations joined and ``&&`` chains split."""
    out, pending, first = [], "", 0
    for k, raw in enumerate(block["text"].splitlines()):
        line = raw.strip()
        if block["lang"] == "console":
            if not pending:
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
        if not pending:
            first = block["line"] + k + 1
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            out.append((first, part.strip()))
    return out


# Commands run as a user runs them, in a process of their own compiled with XLA's optimisation: their
# compiled programs run long enough that the suite's unoptimised compilation (tests/conftest.py) costs more
# than it saves (the README's `tabsim audit experiments/audits`: 16.7 s in this process, 12.6 s so).
OWN_PROCESS = {"audit"}

_REPRODUCED: dict = {}  # `tabsim reproduce` options -> a folder it wrote during this test run


def _run_cli(cmd: str, where: str, xla_flags: str = "") -> None:
    from tabsim.cli import main

    args = shlex.split(cmd, comments=True)
    assert args[0] == "tabsim", cmd
    if args[1] == "reproduce" and "--out" in args:
        # the same reproduction shown on several pages runs once; later pages get a copy of its folder
        i = args.index("--out")
        out = Path(args[i + 1])
        key = tuple(a for a in args[1:i] + args[i + 2:] if a not in ("-q", "--quiet"))
        done = _REPRODUCED.get(key)
        if done is not None and done.exists() and not out.exists():
            shutil.copytree(done, out)
            return
        _REPRODUCED[key] = out.resolve()
    if args[1] in OWN_PROCESS:
        env = {**os.environ, "XLA_FLAGS": xla_flags}
        done = subprocess.run([sys.executable, "-m", "tabsim.cli", *args[1:]], capture_output=True, text=True,
                              env=env, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"{where}: `{cmd}` exited {done.returncode}\n{done.stdout}\n{done.stderr}", pytrace=False)
        return
    result = CliRunner().invoke(main, args[1:], prog_name="tabsim")
    if result.exit_code != 0:
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        tb = "".join(traceback.format_exception(result.exception)) if crashed else ""
        pytest.fail(f"{where}: `{cmd}` exited {result.exit_code}\n{result.output}\n{tb}", pytrace=False)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """The session's cache folder (tests/conftest.py: shared by the workers, removed afterwards): an audit's
    calibration sweep computed by another test is read from it, as a user's second audit reads it."""
    shared = os.environ.get("TABSIM_CACHE")
    return Path(shared) if shared else tmp_path_factory.mktemp("tabsim_cache")


@pytest.fixture
def registries():
    """Registrations an example makes (a new estimator, say) are undone afterwards."""
    from tabsim.sim import algos
    from tabsim.runtime import programs
    from tabsim.sim.envs import ENVS
    from tabsim.config.presets import PRESETS

    regs = [algos.ESTIMATORS, algos.RATIOS, algos.SURROGATES, algos.AGGREGATIONS, algos.KL_ESTIMATORS, ENVS]
    saved, presets = [set(r) for r in regs], dict(PRESETS)
    yield
    for r, s in zip(regs, saved):  # a registry is read-only outside register / unregister
        for name in [n for n in r if n not in s]:
            r.unregister(name)
    PRESETS.clear()
    PRESETS.update(presets)
    # forget compiled programs of components that no longer exist (their names could be reused)
    fields = {"estimator": algos.ESTIMATORS, "ratio": algos.RATIOS, "surrogate": algos.SURROGATES,
              "aggregation": algos.AGGREGATIONS, "kl": algos.KL_ESTIMATORS}
    cache = programs._CACHE  # the one program cache: engine programs and the programs that wrap them
    for key in list(cache):
        spec = next((x for x in key if isinstance(x, algos.AlgoSpec)), None)
        if spec is not None and any(getattr(spec, f) not in reg for f, reg in fields.items()):
            del cache[key]


# Pages whose examples are slow end-to-end runs of commands and functions the default suite already runs
# elsewhere (tests/cli, tests/runtime, tests/audit, tests/core/test_expected.py): `python -m pytest -m heavy`
# runs their examples. The README, the quickstart and the short pages run by default.
HEAVY_PAGES = {"cli.md": "tests/cli, tests/core/test_metrics_config_io.py, tests/prereg run the commands",
               "howto.md": "recipes over commands and functions the other tests run",
               "api.md": "the functions' own tests; test_api_reference_names_every_export checks the page",
               "audit.md": "tests/audit runs the audit on the shipped tables",
               "cluster.md": "tests/runtime/test_dask.py starts a LocalCluster",
               "expected.md": "tests/core/test_expected.py runs the expected flow and the crossover"}


# The README's long commands, run with ``-m heavy`` (README.md-every-command); the default run of the README
# runs its other examples. Each is run at a smaller size or on the same mechanism by a default test:
HEAVY_COMMANDS = {
    "README.md": {
        "tabsim reproduce --out results/reproduce":
            "tests/studies/test_reproduce.py runs the reproduction, reduced, and checks every file it writes",
        "tabsim run my_study.toml":
            "quickstart.md's `tabsim run experiments/configs/paper_sweep.toml` runs a config file by default",
        "tabsim audit experiments/audits":
            "tests/audit runs the audit on the shipped tables and its calibration",
    },
}
README = ROOT / "README.md"


@pytest.mark.parametrize("path, every_command", [
    *((pytest.param(p, False, marks=pytest.mark.heavy, id=p.name) if p.name in HEAVY_PAGES else
       pytest.param(p, False, id=p.name)) for p in FILES),
    pytest.param(README, True, marks=pytest.mark.heavy, id="README.md-every-command")])
def test_examples_run(path, every_command, tmp_path, monkeypatch, cache_dir, registries, user_xla_flags):
    for rel in COPIED:
        shutil.copytree(ROOT / rel, tmp_path / rel)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TABSIM_CACHE", str(cache_dir))
    namespace: dict = {"__name__": "__docs__"}
    t0 = time.perf_counter()
    n_run, slow = 0, []
    left_out = {} if every_command else dict(HEAVY_COMMANDS.get(path.name, {}))
    try:
        n_run = _run_blocks(path, tmp_path, namespace, slow, user_xla_flags, left_out)
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")
    note = f" (slow blocks: {'; '.join(slow)})" if slow else ""
    print(f"\n{path.name}: {n_run} examples in {time.perf_counter() - t0:.1f} s{note}")


def _run_blocks(path: Path, tmp_path: Path, namespace: dict, slow: list, xla_flags: str = "",
                left_out: dict | None = None) -> int:
    """Write, execute and run the blocks of one file in order; returns the number of examples run.

    A command that starts with a key of ``left_out`` is not run; every key must match a command of the file."""
    n_run, left_out, unseen = 0, left_out or {}, set(left_out or {})
    for b in blocks(path):
        where = f"{path.name}:{b['line']}"
        t_block = time.perf_counter()
        if "title" in b["attrs"]:
            target = tmp_path / b["attrs"]["title"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b["text"])
        if b["lang"] == "python":
            code = compile(b["text"], f"{path.name} (block at line {b['line']})", "exec")
            try:
                exec(code, namespace)
            except Exception:
                pytest.fail(f"{where}: python block failed\n{traceback.format_exc()}", pytrace=False)
            n_run += 1
        elif b["lang"] in RUN_LANGS:
            for line, cmd in commands(b):
                skipped = [k for k in left_out if cmd.startswith(k)]
                if skipped:
                    unseen.difference_update(skipped)
                elif cmd.startswith("tabsim "):
                    _run_cli(cmd, f"{path.name}:{line}", xla_flags)
                    n_run += 1
                elif not cmd.startswith(SKIP_PREFIXES):
                    pytest.fail(f"{path.name}:{line}: `{cmd}` is neither a tabsim command nor in SKIP_PREFIXES; "
                                f"run it, allow-list it there, or show it in a ```text block", pytrace=False)
        if time.perf_counter() - t_block > 2.0:
            slow.append(f"line {b['line']}: {time.perf_counter() - t_block:.1f} s")
    assert not unseen, f"{path.name}: no command starts with {sorted(unseen)} (HEAVY_COMMANDS)"
    return n_run


def test_cli_reference_covers_every_command_and_option():
    from tabsim.cli import main, walk

    doc = DOCS / "cli.md"
    text = doc.read_text()
    examples = [cmd for b in blocks(doc) if b["lang"] in RUN_LANGS for _, cmd in commands(b)]
    missing = []
    for path, cmd in walk(main):
        name = " ".join(("tabsim",) + path)
        if not isinstance(cmd, click.Group) and not any(e == name or e.startswith(name + " ") for e in examples):
            missing.append(f"no runnable example of `{name}`")
        for p in cmd.params:
            if isinstance(p, click.Option):
                for opt in p.opts + p.secondary_opts:
                    if opt.startswith("--") and not re.search(re.escape(opt) + r"(?![\w-])", text):
                        missing.append(f"`{name}` option {opt} is not documented")
    assert not missing, "docs/cli.md:\n  " + "\n  ".join(missing)


def _code_text(path: Path) -> str:
    """Inline code spans and fenced blocks of a markdown file."""
    text = path.read_text()
    spans = re.findall(r"`([^`]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))  # spans may wrap
    return "\n".join(spans + [b["text"] for b in blocks(path)])


@pytest.mark.parametrize("module", ["tabsim", "tabsim.studies.factorial", "tabsim.stats", "tabsim.audit", "tabsim.prereg"])
def test_api_reference_names_every_export(module):
    import importlib

    code = _code_text(DOCS / "api.md")
    names = importlib.import_module(module).__all__
    missing = [n for n in names if not re.search(rf"(?<![\w]){re.escape(n)}(?!\w)", code)]
    assert not missing, f"docs/api.md does not name these exports of {module}: {missing}"


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file (lower case, punctuation dropped, spaces to hyphens)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    out: set[str] = set()
    for heading in re.findall(r"^#+\s+(.*?)\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n, base = 0, slug
        while slug in out:
            n += 1
            slug = f"{base}-{n}"
        out.add(slug)
    return out


NOTEBOOK_TEXTS = [ROOT / "notebooks" / "README.md"] + sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
# documents a reader of the site cannot open: the project's science is on docs/science.md instead
OUTSIDE_SITE = re.compile(r"\bSPEC\b|\b(?:STYLE|PUBLISHED)\.md\b|(?<![\w./-])shared/")


def test_no_page_or_notebook_cites_a_document_outside_the_site():
    bad = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
           for path in FILES + NOTEBOOK_TEXTS
           for n, line in enumerate(path.read_text().splitlines(), 1) if OUTSIDE_SITE.search(line)]
    assert not bad, "cite docs/science.md (or another page) instead:\n  " + "\n  ".join(bad)


def test_relative_links_resolve():
    bad = []
    for path in FILES + NOTEBOOK_TEXTS:
        text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file) if file else path
            if not dest.exists():
                bad.append(f"{path.relative_to(ROOT)} -> {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{path.relative_to(ROOT)} -> {target} (no such heading)")
    assert not bad, "broken links:\n  " + "\n  ".join(bad)
