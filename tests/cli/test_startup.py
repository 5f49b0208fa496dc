"""What a user meets first: light imports and help, the on-disk compilation cache on by default, and
PNG figures unless PDF is asked for. Timings are measured in ``experiments/bench_cli.py``; these
tests check the mechanisms (which modules a help loads, where programs are cached)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tabsim.cli import COMMANDS, main, walk

HEAVY = ("jax", "pandas", "matplotlib", "statsmodels", "scipy", "pyarrow", "optax")
TINY = """\
preset = "paper"
[task]
n_prompts = 6
[train]
seeds = 2
steps = 3
batch_size = 4
eval_every = 3
"""


def python(code: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, **(env or {}))
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=300)


def test_import_and_every_help_load_no_heavy_module():
    """``import tabsim``, ``tabsim --help`` and ``tabsim CMD --help`` for every command and subcommand
    import none of JAX, pandas, matplotlib, statsmodels, scipy, pyarrow, optax."""
    res = python(f"""
        import json, sys
        heavy = {HEAVY!r}
        loaded = lambda: sorted(m for m in heavy if m in sys.modules)
        import tabsim
        out = {{"import tabsim": loaded()}}
        from tabsim.cli import main
        paths = [[], ["run"], ["sweep"], ["reproduce"], ["audit"], ["prereg"], ["verify"], ["presets"], ["config"],
                 ["config", "show"]]
        paths += [["prereg", c] for c in ("validate", "keygen", "lock", "amend", "run", "report")]
        for p in paths:
            try:
                main(p + ["--help"], standalone_mode=False)
            except SystemExit:
                pass
            out[" ".join(["tabsim", *p, "--help"])] = loaded()
        print(json.dumps(out))
    """)
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(seen) == 17 and "tabsim prereg report --help" in seen and "tabsim config show --help" in seen
    assert {k: v for k, v in seen.items() if v} == {}


def test_command_list_is_the_commands_own_help():
    ctx = click.Context(main)
    assert set(main.list_commands(ctx)) == set(COMMANDS)
    for name, (_, short) in COMMANDS.items():
        assert main.get_command(ctx, name).get_short_help_str(limit=10**6) == short, name
    listed = CliRunner().invoke(main, ["--help"]).output
    assert all(name in listed for name in COMMANDS)
    assert len([p for p, _ in walk(main)]) == 1 + len(COMMANDS) + 6 + 2 + 2  # prereg's six subcommands, config's and claims' two


def test_lazy_names_resolve():
    import tabsim

    for name in tabsim.__all__:
        assert getattr(tabsim, name) is not None, name
    assert set(tabsim.__all__) <= set(dir(tabsim))
    from tabsim import run  # noqa: F401
    assert tabsim.stats.fit_factorial  # a submodule by attribute
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tabsim.nope  # noqa: B018


@pytest.mark.parametrize("env, expected", [
    ({"TABSIM_COMPILATION_CACHE": "/x/y"}, "/x/y"),
    ({"TABSIM_COMPILATION_CACHE": "0"}, None),
    ({"TABSIM_COMPILATION_CACHE": "off"}, None),
    ({"TABSIM_CACHE": "/c"}, "/c/jax"),
    ({"XDG_CACHE_HOME": "/xdg"}, "/xdg/tabsim/jax"),
    ({"HOME": "/home/u"}, "/home/u/.cache/tabsim/jax"),
])
def test_default_cache_folder(env, expected, monkeypatch):
    from tabsim.runtime.cache import default_compilation_cache

    for var in ("TABSIM_COMPILATION_CACHE", "TABSIM_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    got = default_compilation_cache()
    assert (None if got is None else str(got)) == expected


def _cached(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*-cache")) if folder.is_dir() else []


def _fresh_env(tmp_path: Path, xdg: str, **env) -> dict:
    """This process's environment with no cache setting but ``XDG_CACHE_HOME=tmp_path/xdg``."""
    unset = ("TABSIM_COMPILATION_CACHE", "TABSIM_CACHE", "JAX_COMPILATION_CACHE_DIR", "TABSIM_EXECUTABLE_CACHE")
    return {**{k: v for k, v in os.environ.items() if k not in unset}, "XDG_CACHE_HOME": str(tmp_path / xdg), **env}


def _fresh_cli(tmp_path: Path, xdg: str, *args: str, **env) -> subprocess.CompletedProcess:
    """``python -m tabsim.cli ARGS`` with no cache setting but ``XDG_CACHE_HOME=tmp_path/xdg``."""
    return subprocess.run([sys.executable, "-m", "tabsim.cli", *args], capture_output=True, text=True,
                          timeout=300, env=_fresh_env(tmp_path, xdg, **env))


# heavy: a process of its own; by default tests/cli/test_options_as_arguments.py checks that the flag disables
# the cache before anything computes, and tests/runtime/test_cache_files.py that a disabled cache keeps nothing
@pytest.mark.heavy
def test_no_compile_cache_writes_nothing(tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    r = _fresh_cli(tmp_path, "b", "--no-compile-cache", "run", str(cfg), "--out", str(tmp_path / "o2"), "-q")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "b" / "tabsim").exists()


def test_cache_on_by_default_and_opt_outs(tmp_path):
    """Two fresh processes at once cache their compiled program under $XDG_CACHE_HOME/tabsim/jax with no
    setting, sharing it: both succeed without a cache warning and give the same bits (as
    :func:`test_concurrent_processes_share_one_cache`, here by default; ``--no-compile-cache``:
    :func:`test_no_compile_cache_writes_nothing`); ``--compile-cache DIR`` reads DIR: a process pointed at
    their cache loads the program (a cache hit) and gets the same bits."""
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)

    def cli(xdg: str, *args: str, **env) -> subprocess.CompletedProcess:
        return _fresh_cli(tmp_path, xdg, *args, **env)

    procs = [subprocess.Popen([sys.executable, "-m", "tabsim.cli", "run", str(cfg), "--out", str(tmp_path / o), "-q"],
                              env=_fresh_env(tmp_path, "a"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for o in ("o1", "o2")]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "cache" not in err.lower(), err
    assert (tmp_path / "o1" / "results.parquet").read_bytes() == (tmp_path / "o2" / "results.parquet").read_bytes()
    default = tmp_path / "a" / "tabsim" / "jax"
    assert _cached(default)
    (exe,) = (default / "tabsim-programs").glob("*.jaxexport")  # the training program, traced
    os.utime(exe, ns=(0, 0))
    r = cli("c", "--compile-cache", str(default), "run", str(cfg), "--out", str(tmp_path / "o3"), "-q",
            JAX_LOG_COMPILES="1")
    assert r.returncode == 0, r.stderr
    assert exe.stat().st_mtime_ns > 0 and not (tmp_path / "c" / "tabsim").exists()  # loaded (its use recorded)
    assert "tracing train" not in r.stderr  # the training program not traced again
    assert "Persistent compilation cache hit" in r.stderr  # nor compiled
    assert ((tmp_path / "o1" / "results.parquet").read_bytes() == (tmp_path / "o3" / "results.parquet").read_bytes())
    r = CliRunner().invoke(main, ["--compile-cache", str(cfg), "run", str(cfg)])  # a file, not a folder
    assert r.exit_code != 0 and "--compile-cache" in r.output and "is a file" in r.output


# heavy: two processes of their own; test_cache_on_by_default_and_opt_outs starts its two first processes at once
# on one cache, and tests/runtime/test_cache_files.py checks a folder holding a program written without a size bound
@pytest.mark.heavy
def test_concurrent_processes_share_one_cache(tmp_path):
    """Two processes compile the same program into one cache at once: both succeed without a cache
    warning, and their results are the same bits. The cache already holds a program written without a
    size bound (no last-use record), which JAX's bounded cache would otherwise fail on."""
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "jit_old-0123-cache").write_bytes(b"an older program")
    code = textwrap.dedent(f"""
        import sys, tabsim as ts
        ts.run(ts.load_config({str(cfg)!r}), progress=False).frame.to_parquet(sys.argv[1])
    """)
    env = {**os.environ, "TABSIM_COMPILATION_CACHE": str(tmp_path / "shared")}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / f"r{i}.parquet")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "cache" not in err.lower(), err
    blobs = {(tmp_path / f"r{i}.parquet").read_bytes() for i in range(2)}
    assert len(blobs) == 1
    assert _cached(tmp_path / "shared")


def test_figures_png_by_default_pdf_on_request(tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "png"), "-q"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "png" / "pass1.png").is_file() and not (tmp_path / "png" / "pass1.pdf").exists()
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "both"), "-q", "--pdf"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "both" / "pass1.pdf").read_bytes()[:5] == b"%PDF-"
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "again"), "-q"])  # --pdf does not stick
    assert not (tmp_path / "again" / "pass1.pdf").exists()

    from tabsim.plotting.formats import figure_formats

    assert figure_formats(["PDF", ".png", "pdf"]) == ("pdf", "png")
    with pytest.raises(ValueError, match="allowed: png, pdf, svg"):
        figure_formats(["jpg"])
