"""Figures and the interval method: one palette, readable figures, and t against BCa coverage at 8 seeds."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import click
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LEVEL = 0.95


def _coverage_script():
    spec = importlib.util.spec_from_file_location("interval_coverage", ROOT / "experiments/interval_coverage/run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Shapes of the reproduction's paired per-seed differences (paper preset, p_s = 0.50, 32 seeds):
# d_elicit and d_rd are close to symmetric and light-tailed (skewness ~0, excess kurtosis ~ -1),
# d_null is skewed (skewness ~ -0.6). Beta(2, 2) (skew 0, excess kurtosis -0.86) and Beta(5, 2)
# (skew -0.6) have those shapes and known means.
SHAPES = {"symmetric, light tails": (2.0, 2.0), "skewed": (5.0, 2.0)}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_t_covers_and_bca_undercovers_with_8_seeds(shape):
    a, b = SHAPES[shape]
    mod = _coverage_script()
    n_studies = 1000
    pool = np.random.default_rng(7).beta(a, b, size=200_000)  # the known distribution (its mean is known)
    cov = mod.coverage(pool, n_studies=n_studies, n_seeds=8, seed=11).set_index("method")["coverage"]
    se = np.sqrt(LEVEL * (1 - LEVEL) / n_studies)  # binomial s.e. of a coverage estimate at the nominal level
    assert abs(cov["t"] - LEVEL) < 3.5 * se, (shape, cov.to_dict(), se)
    assert cov["bca"] < LEVEL - 3.5 * se, (shape, cov.to_dict(), se)  # BCa under-covers at 8 seeds


@pytest.mark.heavy
def test_coverage_on_the_simulators_own_differences():
    """The same check on pools of real paper-preset seeds (every prior and term of the sweep)."""
    mod = _coverage_script()
    _, sp = mod.pool_partition(seeds=128, steps=100)
    n_studies = 400
    table = mod.coverage_table(sp, n_studies=n_studies)
    by = table.groupby("method")["coverage"].mean()
    n_cells = table[table.method == "t"].shape[0]
    se_mean = np.sqrt(LEVEL * (1 - LEVEL) / (n_studies * n_cells))  # s.e. of the mean coverage over the cells
    assert abs(by["t"] - LEVEL) < 4 * se_mean, by.to_dict()
    assert by["bca"] < LEVEL - 4 * se_mean, by.to_dict()


def test_reproduce_uses_the_interval_method_the_docs_advise():
    from tabsim.studies.reference.design import INTERVAL_METHOD

    assert INTERVAL_METHOD == "t"
    assert 'method="t"' in (ROOT / "docs/quickstart.md").read_text() or "t interval" in (
        ROOT / "docs/quickstart.md").read_text()


def test_coinciding_arms_stay_visible_in_pass1_plot():
    from tabsim.plotting.figures import plot_curves

    rows = []
    for seed in range(3):
        for step in (0, 50, 100):
            for arm in ("frozen", "random", "true"):
                val = 0.3 if arm != "true" else 0.3 + step / 1000
                rows.append({"seed": seed, "step": step, "arm": arm, "pass1": val + 0.01 * seed})
    fig = plot_curves(pd.DataFrame(rows), metric="pass1")
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    f, r = lines["frozen"], lines["random"]
    assert np.allclose(f.get_ydata(), r.get_ydata())  # the data coincide ...
    assert (f.get_linestyle(), f.get_marker()) != (r.get_linestyle(), r.get_marker())  # ... the styles do not
    assert not np.allclose(f.get_xdata(), r.get_xdata())  # and they are dodged apart
    assert f.get_color() != r.get_color()
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {"frozen", "random", "true"}
    matplotlib.pyplot.close(fig)


def test_one_palette_no_hard_coded_colours_elsewhere():
    """Colours are named once, in tabsim/plotting/palette.py; code, study scripts and notebooks take them from there."""
    hexcolor = re.compile(r"""["']#[0-9a-fA-F]{6}["']""")
    named = re.compile(r"""color\s*=\s*["'](C\d|tab:\w+|red|blue|green|orange|purple)["']""")
    bad = []
    for folder in ("tabsim", "experiments", "notebooks"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "tabsim/plotting/palette.py":
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if hexcolor.search(line) or named.search(line):
                    bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "hard-coded colours (use tabsim.plotting):\n  " + "\n  ".join(bad)


def test_partition_terms_share_their_arms_colours():
    from tabsim.audit.report import TERM_COLORS as AUDIT
    from tabsim.plotting import ARM_COLORS, TERM_COLORS

    assert TERM_COLORS["d_null"] == ARM_COLORS["random"]
    assert TERM_COLORS["d_elicit"] == ARM_COLORS["majority"]
    assert TERM_COLORS["d_rd"] == ARM_COLORS["true"]
    assert AUDIT is TERM_COLORS
    assert len(set(ARM_COLORS.values())) == len(ARM_COLORS)  # arms are told apart by colour


def test_d_majority_has_its_own_palette_colour_and_the_audit_figure_uses_it():
    """d_majority (= d_null + d_elicit) is drawn beside both in the audit figure: a colour no arm and no other
    term has (it borrowed the offline-majority arm's shade)."""
    from matplotlib.colors import to_hex

    from tabsim.audit import load_entries
    from tabsim.audit.core import audit
    from tabsim.audit.report import plot_terms
    from tabsim.plotting import ARM_COLORS, TERM_COLORS

    mine = TERM_COLORS["d_majority"]
    others = {c for t, c in TERM_COLORS.items() if t != "d_majority"} | set(ARM_COLORS.values())
    assert mine not in others
    res = audit(load_entries([ROOT / "experiments" / "audits" / "ttrl.yaml"]), calibrate=False)
    fig = plot_terms(res)
    legend = {t.get_text(): to_hex(h.get_color()) for t, h in zip(fig.legends[0].get_texts(),
                                                                   fig.legends[0].legend_handles)}
    assert legend["d_majority"] == mine
    drawn = {to_hex(ln.get_color()) for ax in fig.axes for ln in ax.get_lines()}
    drawn |= {to_hex(c.get_color()[0]) for ax in fig.axes for c in ax.collections if len(c.get_color())}
    assert mine in drawn and ARM_COLORS["majority_offline"] not in drawn
    matplotlib.pyplot.close(fig)


def test_every_option_of_every_command_has_help():
    from tabsim.cli import main, walk

    missing = [f"tabsim {' '.join(path)} {p.opts[0]}" for path, cmd in walk(main) for p in cmd.params
               if isinstance(p, click.Option) and not (p.help or "").strip()]
    assert not missing, "options without help: " + ", ".join(missing)


def test_preset_options_list_the_presets():
    from tabsim.cli import main, walk
    from tabsim.config.presets import PRESETS

    for path, cmd in walk(main):
        for p in cmd.params:
            if isinstance(p, click.Option) and "--preset" in p.opts:
                assert all(name in p.help for name in PRESETS), (path, p.help)


def test_sweep_progress_bar_says_sweep(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tabsim.runtime import progress as api
    from tabsim.cli import main

    seen = []
    real = api.progress_bar

    def spy(total, enabled, desc, *rest):
        seen.append(desc)
        return real(total, False, desc, *rest)

    monkeypatch.setattr(api, "progress_bar", spy)
    r = CliRunner().invoke(main, ["sweep", "--vary", "prior_strength=0.5", "--seeds", "2", "--steps", "2",
                                  "--out", str(tmp_path / "s"), "--no-figure"])  # the bar is the check
    assert r.exit_code == 0, r.output
    assert seen and all("sweep" in d for d in seen), seen


def _audit_result(n_models: int, tmp_path):
    """An audit (no calibration) of ``n_models`` rows of the shipped co-rewarding table, renamed apart.

    That table has no random arm, so d_null and d_elicit are bounded: the figure must draw bounds.
    """
    from tabsim.audit import audit, load_entries

    src = (ROOT / "experiments/audits/co_rewarding.csv").read_text().splitlines()
    comments = [ln for ln in src if ln.startswith("#")]
    header, *rows = [ln for ln in src if ln and not ln.startswith("#")]
    cols = header.split(",")
    out = []
    for i in range(n_models):
        cells = rows[i % len(rows)].split(",")
        cells[cols.index("model")] = f"model-{i:02d}"
        out.append(",".join(cells))
    path = tmp_path / "table.csv"
    path.write_text("\n".join(comments + [header] + out) + "\n")
    return audit(load_entries([path]), calibrate=False)


@pytest.mark.parametrize("n_models", [4, 20])
def test_audit_figure_readable_for_4_to_20_entries(n_models, tmp_path):
    from tabsim.audit.report import plot_terms

    res = _audit_result(n_models, tmp_path)
    fig = plot_terms(res)
    ax = max(fig.axes, key=lambda a: len(a.get_yticklabels()))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    n_per_panel = len(res.audit[res.audit.benchmark == res.audit.benchmark.iloc[0]])
    assert len(labels) == n_per_panel and len(set(labels)) == n_per_panel  # one labelled row per entry
    # at least 0.4 inch of height per entry, whatever the count
    assert fig.get_figheight() >= 0.4 * n_per_panel
    # bounded terms are brackets without a point estimate: no line of the bounded rows carries an "o"
    markers = {ln.get_marker() for ln in ax.get_lines()}
    assert "|" in markers  # bracket ends of the bounds
    matplotlib.pyplot.close(fig)
