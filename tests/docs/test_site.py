"""The documentation site builds with ``mkdocs build --strict``, publishes the executed notebooks with
their figures, and fails on a broken link; the built HTML shows no unrendered Markdown and every
in-page anchor resolves (docs/_site/check_html.py, which ``--strict`` does not check).

The notebooks are not executed by the default build: the ``site`` fixture publishes copies of them
without outputs (jupytext's conversion, in the build folder the site's hook reads,
``TABSIM_NOTEBOOK_BUILD``), so the pages, bars, links and scripts are checked in seconds.
``tests/docs/test_notebooks.py`` executes the notebooks (one by default, every one with ``-m heavy``); the
checks of the executed pages (their figures, the sliders' notes) build with the executed copies in
``build/notebooks/`` (``executed_site``, ``-m heavy``), where the hook executes a missing or stale copy
itself (docs/_site/hooks.py).
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocs_jupyter")
pytest.importorskip("material")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_site"))
from check_html import html_problems  # noqa: E402  (docs/_site is not a package)


def _build(config: Path, site: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1", **(env or {})})


def _build_site(out: Path, notebooks: Path | None = None) -> Path:
    env = {"TABSIM_NOTEBOOK_BUILD": str(notebooks)} if notebooks else {}
    r = _build(ROOT / "mkdocs.yml", out, env)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site with the notebooks published unexecuted (nothing runs a kernel)."""
    import jupytext

    notebooks = tmp_path_factory.mktemp("build") / "notebooks"  # the hook publishes from a folder so named
    notebooks.mkdir()
    for src in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        jupytext.write(jupytext.read(src), notebooks / f"{src.stem}.ipynb")  # newer than its source: not executed
    return _build_site(tmp_path_factory.mktemp("site"), notebooks)


@pytest.fixture(scope="module")
def executed_site(tmp_path_factory):
    """The site as ``mkdocs build`` makes it: the executed notebooks of build/notebooks/ (executing any
    missing or stale copy)."""
    return _build_site(tmp_path_factory.mktemp("executed-site"))


def test_site_has_every_docs_page_and_the_readme(site):
    for md in (ROOT / "docs").glob("*.md"):
        assert (site / f"{md.stem}.html").is_file(), md.name
    assert (site / "readme.html").is_file()
    assert (site / "notebooks" / "index.html").is_file()  # notebooks/README.md


@pytest.mark.heavy
def test_site_publishes_every_notebook_executed_with_figures(executed_site):
    site = executed_site
    for src in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        page = site / "notebooks" / f"{src.stem}.html"
        assert page.is_file(), src.name
        html = page.read_text()
        assert "data:image/png;base64" in html or "<img" in html, f"{src.name}: no figure on its page"


def test_every_script_a_page_loads_is_a_file_of_the_site(site):
    """No page fetches a script from the network or from an empty source (MathJax included: before, the
    notebook pages loaded it from a CDN or from src="")."""
    bad = []
    for page in sorted(site.rglob("*.html")):
        for src in re.findall(r'<script\b[^>]*\bsrc="([^"]*)"', page.read_text()):
            path = src.split("?")[0]
            target = (site / path.lstrip("/") if path.startswith("/") else page.parent / path).resolve()  # 404.html: from the root
            if not src or "//" in src or not target.is_file():
                bad.append(f"{page.relative_to(site)}: {src!r}")
    assert not bad, bad[:10]


@pytest.mark.parametrize("built", ["site", pytest.param("executed_site", marks=pytest.mark.heavy)])
def test_notebook_pages_open_figures_full_size_and_link_their_neighbours(built, request):
    """Figures are files a click opens; each page has the bar (previous, next, the .ipynb to download).
    By default on the unexecuted pages (the bar and links; no figures), with ``-m heavy`` on the executed."""
    site = request.getfixturevalue(built)
    stems = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))]
    for i, stem in enumerate(stems):
        html = (site / "notebooks" / f"{stem}.html").read_text()
        assert not re.search(r'<img[^>]*src="data:image/png', html), f"{stem}: a figure left inline"
        figures = re.findall(r'<a class="tabsim-figure" href="(figures/[^"]+\.png)"', html)
        shown = re.findall(r'<img([^>]*)src="figures/[^"]+"([^>]*)>', html)
        assert len(figures) == len(shown), f"{stem}: {len(shown)} figures, {len(figures)} open full size"
        for fig, attrs in zip(figures, shown):
            png = (site / "notebooks" / fig).read_bytes()
            pixels = struct.unpack(">I", png[16:20])[0]
            shown_width = re.search(r'\bwidth="(\d+)"', "".join(attrs))
            assert shown_width, f"{stem}: {fig} has no display width (the retina format gives one)"
            width = int(shown_width.group(1))
            # the column is 584-688 px at a desktop width: a figure no wider keeps its 12 pt text at body size
            assert width <= 600, f"{stem}: {fig} is {width} px wide; stack its panels (tabsim.plotting.PAGE_RC)"
            # twice the pixels it is shown at: sharp on a high-DPI screen
            assert abs(pixels - 2 * width) <= 2, f"{stem}: {fig} has {pixels} px for {width} px shown"
        assert 'class="tabsim-nb-bar"' in html and f'href="{stem}.ipynb" download' in html, stem
        assert (site / "notebooks" / f"{stem}.ipynb").is_file(), stem
        if i > 0:
            assert f'href="{stems[i - 1]}.html"' in html, f"{stem}: no link to the previous notebook"
        if i + 1 < len(stems):
            assert f'href="{stems[i + 1]}.html"' in html, f"{stem}: no link to the next notebook"


# A second build of the whole site: by default the site is built once (``site``, with --strict) and a broken
# link in the docs fails tests/docs/test_docs.py::test_relative_links_resolve.
@pytest.mark.heavy
def test_strict_build_fails_on_a_broken_link(tmp_path):
    """The same configuration on a copy of docs/ whose index links to a page that does not exist."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [a page that is not there](no_such_page.md).\n")
    cfg = (ROOT / "mkdocs.yml").read_text()
    (tmp_path / "mkdocs.yml").write_text(cfg)
    # publish the already executed notebooks (nothing is executed again)
    build = ROOT / "build" / "notebooks"
    if build.is_dir():
        shutil.copytree(build, tmp_path / "build" / "notebooks")
    r = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert r.returncode != 0
    assert "no_such_page.md" in r.stdout + r.stderr


def test_built_html_has_no_raw_markdown_and_every_anchor_resolves(site):
    problems = html_problems(site)
    assert not problems, "\n".join(problems)


def test_html_check_finds_an_unrendered_fence_and_a_dangling_anchor(tmp_path):
    """What the site looked like when fences were opened as ```yaml file=...: the check must say so."""
    (tmp_path / "cli.html").write_text(
        '<h2 id="run">run</h2><p>A plan: ```yaml file=plan.yaml schema: 1 ```</p>'
        '<p>See <a href="#prereg-validate">validate</a>, <a href="#run">run</a>, '
        '<a href="other.html#nowhere">other</a>, <a href="../docs/science.md">science</a> and [the audit](audit.md).'
        '</p><pre><code>```ok in code```</code></pre>')
    (tmp_path / "other.html").write_text('<h1 id="top">x</h1><p>**bold** left</p>')
    problems = html_problems(tmp_path)
    assert any("code fence" in p and "cli.html" in p for p in problems), problems
    assert any("#prereg-validate" in p for p in problems), problems
    assert any("other.html#nowhere" in p for p in problems), problems
    assert any("Markdown link" in p for p in problems), problems
    assert any("Markdown bold" in p and "other.html" in p for p in problems), problems
    assert any("../docs/science.md goes to no file" in p for p in problems), problems
    assert len(problems) == 6, problems  # nothing in code, and the resolving anchor #run, is reported


def _crossover_grid_module():
    spec = importlib.util.spec_from_file_location("crossover_grid", ROOT / "experiments" / "crossover_grid.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_crossover_grid_matches_the_simulator():
    """The interactive figure's grid (experiments/crossover_grid.py) is what ts.run gives at two of its priors."""
    grid_mod = _crossover_grid_module()
    stored = json.loads((ROOT / "docs" / "assets" / "crossover_grid.json").read_text())
    assert stored["config"] == grid_mod.config(), "the grid was computed with another configuration: rerun the script"
    assert sorted({r["p_s"] for r in stored["rows"]}) == grid_mod.PRIORS
    assert abs(stored["mode_switch"] - grid_mod.mode_switch()) < 1e-4
    priors = [0.3, 0.6]  # one below the crossover, one above
    fresh = {(r["p_s"], r["arm"], r["step"]): r["pass1"] for r in grid_mod.rows(priors)}
    old = {(r["p_s"], r["arm"], r["step"]): r["pass1"] for r in stored["rows"] if r["p_s"] in priors}
    assert old.keys() == fresh.keys()
    worst = max(abs(old[k] - fresh[k]) for k in fresh)
    assert worst < 1e-4, f"the stored grid differs from the simulator by {worst:.2e}: rerun experiments/crossover_grid.py"


def test_science_page_carries_the_interactive_figure_and_its_data(site):
    html = (site / "science.html").read_text()
    assert 'class="tabsim-vega"' in html and 'class="tabsim-vega-data"' in html
    for js in ("assets/vega/vega.min.js", "assets/vega/vega-lite.min.js", "assets/tabsim-vega.js"):
        assert js in html and (site / js).is_file(), js


@pytest.mark.heavy
def test_slider_widgets_show_on_the_site_as_the_figure_they_drew(executed_site):
    site = executed_site
    """The site runs no kernel: a notebook's sliders become a note naming them above the figure they drew."""
    for stem in ("01_one_grpo_step", "02_self_consistency_crossover", "03_random_rewards_and_clipping"):
        html = (site / "notebooks" / f"{stem}.html").read_text()
        assert "interactive(children=" not in html, f"{stem}: the widget's text stands in for its figure"
        assert 'class="tabsim-widget-note"' in html, f"{stem}: no note for its sliders"
        note = html[html.index('class="tabsim-widget-note"'):]
        assert '<img' in note[:20000], f"{stem}: no figure after the sliders' note"


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_no_page_fetches_fonts_or_scripts_from_the_network(site):
    """System fonts (no Google Fonts), and every script and stylesheet a page loads is a file of the site."""
    for page in _pages(site):
        html = page.read_text()
        assert "fonts.googleapis.com" not in html and "fonts.gstatic.com" not in html, page.name
        remote = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]*"[^>]*>', html)
        assert not [r for r in remote if "<script" in r or "stylesheet" in r], (page.name, remote)


def test_search_works_from_disk(site):
    """The offline plugin's output: the index as a script (loadable from file://) and the worker shim on every page."""
    index = site / "search" / "search_index.js"
    text = index.read_text()
    assert text.startswith("var __index = ")
    inlined = json.loads(text.removeprefix("var __index = "))
    assert inlined == json.loads((site / "search" / "search_index.json").read_text())
    assert inlined["docs"], "an empty search index"
    for page in (p for p in _pages(site) if p.name != "404.html"):  # 404.html: only a web server shows it
        shim = re.search(r'<script src="((?:\.\./)*)assets/iframe-worker/shim\.js"', page.read_text())
        assert shim, f"{page.name}: no worker shim (search would not start from disk)"
        assert (page.parent / shim.group(1) / "assets" / "iframe-worker" / "shim.js").is_file()
