"""Every teaching notebook executes without error (so none of them rots).

The notebooks are jupytext "percent" files (``notebooks/NN_name.py``). Each is read with jupytext and
run top to bottom by nbclient in a fresh ``python3`` kernel whose working directory is a temporary
folder, so nothing a notebook writes lands in the repository. A cell that raises fails the test.

The executed notebook (outputs and figures included) is written to ``build/notebooks/NN_name.ipynb``
(or ``$TABSIM_NOTEBOOK_BUILD``), where the documentation site (``mkdocs.yml``, ``tests/docs/test_site.py``)
publishes it without executing it a second time.
"""
from __future__ import annotations

import ast
import json
import os
import tempfile
import re
import shutil
import time
import weakref
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
BUILD = Path(os.environ.get("TABSIM_NOTEBOOK_BUILD", NOTEBOOKS.parent / "build" / "notebooks"))
CELL_TIMEOUT = 120  # seconds per cell


def execute_notebook(nb, tmp_path):
    """Run ``nb`` top to bottom in a kernel of its own (:func:`notebook_client`), then shut the kernel down: a
    client given its kernel manager does not own the kernel and leaves it running (nbclient's ``owns_km``), so
    without this every notebook's kernel lived, with its half a gigabyte, until the test process ended."""
    client = notebook_client(nb, tmp_path)
    try:
        client.execute()
    finally:
        if client.km.has_kernel:
            client.km.shutdown_kernel(now=True)


def notebook_client(nb, tmp_path):
    """A client whose kernel talks over Unix sockets in a folder of its own, not TCP ports.

    A kernel on TCP ports can lose its output to a port that another test's process (a Dask cluster
    starting beside it in the other xdist worker) took between the choice of the port and its bind:
    nbclient then waits the whole cell timeout for output that never comes (115-120 s for two notebooks
    in each of two full runs, the CPU half idle meanwhile)."""
    from jupyter_client.manager import KernelManager

    sockets = tempfile.mkdtemp(prefix="tabsim-kernel-")  # short: a Unix socket path has at most 107 bytes
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "k"))
    client = nbclient.NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(tmp_path)}})
    weakref.finalize(client, shutil.rmtree, sockets, True)  # the folder goes with the client
    return client


@pytest.fixture(scope="module")
def notebook_cache(tmp_path_factory):
    """One cache for the notebooks, outside the repository, as a reader's machine keeps one: a program an
    earlier notebook compiled is loaded, not compiled again."""
    return tmp_path_factory.mktemp("notebook-cache")


def test_there_are_six_numbered_notebooks():
    numbers = {int(p.name[:2]) for p in PATHS}
    assert set(range(1, 7)) <= numbers, f"missing notebooks: {sorted(set(range(1, 7)) - numbers)}"
    assert len(numbers) == len(PATHS), "two notebooks share a number"
    assert DEFAULT_EXECUTED in {p.stem for p in PATHS}, f"{DEFAULT_EXECUTED}: the notebook the default run executes"


# The default run executes one short notebook (the kernel, jupytext, nbclient and the written copy the site
# publishes); the others run with ``-m heavy``. Their static checks below run by default, and the site's build
# (tests/docs/test_site.py) executes any notebook whose copy in build/notebooks is missing or older than its source.
DEFAULT_EXECUTED = "05_preregistered_study"


@pytest.mark.parametrize("path", [p if p.stem == DEFAULT_EXECUTED else pytest.param(p, marks=pytest.mark.heavy)
                                  for p in PATHS], ids=[p.stem for p in PATHS])
def test_notebook_executes(path, tmp_path, monkeypatch, optimized_xla, notebook_cache):
    assert "# %% [markdown]" in path.read_text(), f"{path.name}: not a jupytext percent file"
    nb = jupytext.read(path)
    assert nb.cells and nb.cells[0].cell_type == "markdown", f"{path.name}: start with a markdown intro"
    # the kernel inherits the environment: keep the figures headless and any cache in the tmp folder
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("TABSIM_CACHE", str(notebook_cache))
    t0 = time.perf_counter()
    failure = None
    try:
        execute_notebook(nb, tmp_path)
    except nbclient.exceptions.CellExecutionError as err:
        failure = _strip_ansi(str(err))
    if failure is not None:  # outside the except block: report the cell's traceback, not ours
        pytest.fail(f"{path.name}: a cell failed\n{failure}", pytrace=False)
    BUILD.mkdir(parents=True, exist_ok=True)
    tmp = BUILD / f"{path.stem}.ipynb.tmp"
    nbformat.write(nb, tmp)
    os.replace(tmp, BUILD / f"{path.stem}.ipynb")  # atomic: the site never reads half a notebook
    print(f"{path.name}: executed in {time.perf_counter() - t0:.1f} s")


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# ---- the notebooks woven into the site (static checks of the sources: nothing is executed) ----

DOCS = NOTEBOOKS.parent / "docs"
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _markdown(path: Path) -> list[str]:
    """The text of the markdown cells of a jupytext notebook (comment markers removed)."""
    return [c.source for c in jupytext.read(path).cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_states_level_runtime_and_the_reference_pages_it_uses(path):
    intro = _markdown(path)[0]
    assert re.search(r"Level: (introductory|intermediate|advanced)", intro), f"{path.name}: no level in the intro"
    assert re.search(r"runs in about \d+ s", intro), f"{path.name}: no runtime in the intro"
    pages = [t for t in MD_LINK.findall(intro) if t.startswith("../docs/")]
    assert pages, f"{path.name}: the intro links no reference page"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_reference_pages_link_back_to_the_notebooks_that_use_them(path):
    intro = _markdown(path)[0]
    missing = []
    for target in {t.split("#")[0] for t in MD_LINK.findall(intro) if t.startswith("../docs/")}:
        page = (NOTEBOOKS / target).resolve()
        assert page.is_file(), f"{path.name}: links {target}, which does not exist"
        if f"../notebooks/{path.name}" not in page.read_text():
            missing.append(page.name)
    assert not missing, f"{path.name} links {missing}, which do not link back to ../notebooks/{path.name}"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_ends_with_exercises_whose_answers_a_reader_opens(path):
    text = "\n".join(_markdown(path))
    assert "## Exercises" in text, f"{path.name}: no exercises"
    exercises = text[text.index("## Exercises"):]
    n_open, n_close = exercises.count("<details>"), exercises.count("</details>")
    assert n_open >= 2 and n_open == n_close, f"{path.name}: {n_open} answers (<details>), {n_close} closed"
    assert "## What to try" in text, f"{path.name}: keep the 'What to try' list beside the exercises"


def test_overview_links_every_notebook_with_level_and_runtime():
    readme = (NOTEBOOKS / "README.md").read_text()
    for path in PATHS:
        row = next((ln for ln in readme.splitlines() if f"]({path.name})" in ln), None)
        assert row is not None, f"notebooks/README.md does not link {path.name}"
        assert re.search(r"\| (introductory|intermediate|advanced) \| about \d+ s \|", row), row


# ---- the sliders (ipywidgets) of notebooks 01-03 redraw their figure quickly in a running kernel ----

# slider moves made in the kernel after the notebook has run: (slider, new value, must redraw in < FAST s)
SLIDER_MOVES = {
    "01_one_grpo_step": [("p", 0.5, True), ("G", 32, True), ("p", 0.84, True)],
    "02_self_consistency_crossover": [("p_s", 0.425, True), ("p_s", 0.7, True)],
    # a new number of epochs compiles its program once (seconds); later moves at it are fast
    "03_random_rewards_and_clipping": [("gamma", 0.5, True), ("eps", 0.1, True), ("epochs", 2, False),
                                       ("gamma", 0.3, True)],
}
FAST = 1.0  # seconds for one redraw: the computation and the rendered figure


@pytest.mark.heavy
@pytest.mark.parametrize("stem", sorted(SLIDER_MOVES))
def test_sliders_redraw_the_figure_quickly(stem, tmp_path, monkeypatch, optimized_xla, notebook_cache):
    nb = jupytext.read(NOTEBOOKS / f"{stem}.py")
    probe = f"""
import json as _json, time as _time
_sliders = {{w.description: w for w in explore.children if hasattr(w, "description") and w.description}}
_times = []
for _name, _value, _fast in {SLIDER_MOVES[stem]!r}:
    _t0 = _time.perf_counter()
    _sliders[_name].value = _value  # the interactive widget redraws its figure before this returns
    _times.append([_name, _value, _fast, _time.perf_counter() - _t0])
print("SLIDER_TIMES " + _json.dumps(_times))
"""
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("TABSIM_CACHE", str(notebook_cache))
    execute_notebook(nb, tmp_path)
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    times = json.loads(text.split("SLIDER_TIMES ", 1)[1])
    print(f"{stem}: " + ", ".join(f"{n}={v}: {t:.2f} s" for n, v, _, t in times))
    slow = [(n, v, round(t, 2)) for n, v, fast, t in times if fast and t > FAST]
    assert not slow, f"{stem}: redraws slower than {FAST} s: {slow}"
    widget_outputs = [o for c in nb.cells for o in c.get("outputs", []) if "application/vnd.jupyter.widget-view+json"
                      in o.get("data", {})]
    assert widget_outputs, f"{stem}: no slider widget displayed"


# ---- one colour per arm, term and algorithm: figures name their colours from tabsim.plotting ----

PLOT_CALLS = {"plot", "bar", "barh", "errorbar", "hist", "scatter", "fill_between", "step", "axvline", "axhline",
              "axvspan", "axhspan", "hlines", "vlines"}
NEUTRAL = re.compile(r"^(k|black|grey|gray|white|w|0?\.\d+)$")  # reference lines and rules, not data


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_figures_take_their_colours_from_the_palette_by_name(path):
    """Every plotting call names its colour: a palette entry (``ARM_COLORS[arm]``, ...) or a neutral grey
    for a rule; never matplotlib's colour cycle (which is how an arm changed colour between figures),
    a hex code or a colour word."""
    src = "\n".join(c.source for c in jupytext.read(path).cells if c.cell_type == "code")
    bad = []
    for node in ast.walk(ast.parse("\n".join(ln for ln in src.splitlines() if not ln.startswith(("%", "!"))))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PLOT_CALLS):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        fmts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if any(re.match(r"^[bgrcmyw]", f) for f in fmts):
            bad.append(f"line {node.lineno}: a colour in the format string {fmts}")
        elif "color" not in kw and "c" not in kw and None not in kw and not any(f.startswith("k") for f in fmts):
            bad.append(f"line {node.lineno}: no color= (matplotlib's cycle would pick one): {ast.unparse(node)[:70]}")
        else:
            value = kw.get("color", kw.get("c"))
            if isinstance(value, ast.Constant) and not NEUTRAL.match(str(value.value)):
                bad.append(f"line {node.lineno}: colour {value.value!r} is not a palette name or a neutral grey")
    assert not bad, f"{path.name}:\n  " + "\n  ".join(bad)
