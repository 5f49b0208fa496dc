"""MkDocs hooks of the documentation site (``mkdocs.yml``): the executed notebooks and repository links.

* The teaching notebooks (``notebooks/NN_*.py``, jupytext percent files) are published executed,
  with their figures, from ``build/notebooks/NN_*.ipynb``. ``tests/test_notebooks.py`` writes those
  files when it executes the notebooks; a copy that is missing or older than its source is executed
  here (jupytext + nbclient, the same way), so ``mkdocs build`` alone also works.
* Each notebook page gets a bar at its top and bottom (previous and next notebook, the executed
  ``.ipynb`` to download, the ``.py`` source), its figures become files of the site that a click opens
  at full size, and links written for the repository (``../docs/science.md#...``) point at the pages.
* An interactive figure (``<div class="tabsim-vega" data-grid="assets/FILE.json">``, drawn by
  ``docs/assets/tabsim-vega.js``) gets its grid inlined after it, so it also works from disk.
* ``notebooks/README.md`` and the repository ``README.md`` become pages (``notebooks/README.md``,
  ``readme.md``). Links written for the repository (``../README.md``, ``docs/cli.md``,
  ``notebooks/01_one_grpo_step.py``) are rewritten to the site's pages; a link to a repository file
  that is not on the site becomes its path in code format, so ``--strict`` only fails on links that
  are broken in the repository too.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import os
import posixpath
import re
import time
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

LOG = logging.getLogger("mkdocs.hooks.tabsim")  # mkdocs prints its INFO lines
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")
HREF = re.compile(r'(<a\b[^>]*?\bhref=")([^"#:]*(?:#[^"]*)?)(")')
GRID_DIV = re.compile(r'<div\b[^>]*\bclass="tabsim-vega"[^>]*\bdata-grid="([^"]+)"[^>]*>\s*</div>')
PNG = re.compile(r'<img\b([^>]*?)\bsrc="data:image/png;base64,([^"]+)"([^>]*)>')


def _root(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _build_dir(config) -> Path:
    return Path(os.environ.get("TABSIM_NOTEBOOK_BUILD", _root(config) / "build" / "notebooks"))


def execute_notebook(source: Path, target: Path, *, timeout: int = 300) -> None:
    """Execute the jupytext notebook ``source`` in a fresh kernel (in a temporary folder) into ``target``."""
    import tempfile

    import jupytext
    import nbclient
    import nbformat

    from traitlets.config import Config

    nb = jupytext.read(source)
    with tempfile.TemporaryDirectory() as tmp:
        env = {"MPLBACKEND": "module://matplotlib_inline.backend_inline", "TABSIM_CACHE": str(Path(tmp) / "cache")}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        # the kernel talks over Unix sockets in the temporary folder: over TCP each kernel logged a warning that
        # its traffic is unencrypted (7 lines in a first build), and a port can be taken between its choice and bind
        sockets = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(tmp) / "kernel")}})
        try:
            nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", config=sockets,
                                    resources={"metadata": {"path": tmp}}).execute()
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_target = target.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp_target)
    os.replace(tmp_target, target)


def executed_notebooks(config) -> list[tuple[Path, Path]]:
    """Every teaching notebook and its executed copy, executing (with a line each) the missing or stale ones."""
    root, build = _root(config), _build_dir(config)
    sources = sorted((root / "notebooks").glob("[0-9][0-9]_*.py"))
    stale = [s for s in sources
             if not (t := build / f"{s.stem}.ipynb").exists() or t.stat().st_mtime < s.stat().st_mtime]
    for i, src in enumerate(stale, 1):
        # a first build executes them all (minutes): say which one is running, and what it took
        LOG.info("executing notebook %d/%d: notebooks/%s (into %s; kept for later builds)", i, len(stale), src.name,
                 build)
        t0 = time.perf_counter()
        execute_notebook(src, build / f"{src.stem}.ipynb")
        LOG.info("executed notebooks/%s in %.0f s", src.name, time.perf_counter() - t0)
    return [(src, build / f"{src.stem}.ipynb") for src in sources]


@event_priority(50)  # before mkdocs-jupyter turns .ipynb files into pages
def on_files(files, config):
    root = _root(config)
    site, urls = config["site_dir"], config["use_directory_urls"]
    static = _build_dir(config).parent / "site_notebooks"
    for _, nb in executed_notebooks(config):
        nb = _static_copy(nb, static)
        files.append(File(f"notebooks/{nb.name}", src_dir=str(nb.parent.parent), dest_dir=site, use_directory_urls=urls))
    readme = root / "notebooks" / "README.md"
    files.append(File("notebooks/README.md", src_dir=str(root), dest_dir=site, use_directory_urls=urls))
    del readme
    for page, source in REPO_PAGES.items():
        files.append(_RenamedFile(page, root / source, site, urls))
    es5 = mathjax_root()
    for path in mathjax_files():
        files.append(_RenamedFile(f"{MATHJAX_DIR}/{path}", es5 / path, site, urls))
    _FILES[:] = list(files)
    return files


# MathJax for the notebook pages (mkdocs.yml: mkdocs-jupyter's custom_mathjax_url), served from the site
# itself: the SVG build with every TeX extension in one file (no font files to fetch) and the menu and
# accessibility parts it loads, copied from the django-static-mathjax package (the test extra; it has no
# dependencies), so a page opened from disk fetches nothing from the network.
MATHJAX_DIR = "assets/mathjax"
MATHJAX_FILES = ("tex-svg-full.js", "ui", "a11y")


def mathjax_root() -> Path:
    """The folder holding MathJax's ``es5`` build, ``.../mathjax/static/mathjax/es5`` (installed package)."""
    import importlib.util  # lazy: only when the site is built

    spec = importlib.util.find_spec("mathjax")
    if spec is None or spec.origin is None:
        raise RuntimeError('MathJax for the notebook pages is not installed: pip install -e ".[test]" '
                           "(it brings django-static-mathjax)")
    return Path(spec.origin).parent / "static" / "mathjax" / "es5"


def mathjax_files() -> list[str]:
    """The site paths under :data:`MATHJAX_DIR` of the MathJax files a notebook page loads."""
    es5 = mathjax_root()
    out = []
    for name in MATHJAX_FILES:
        path = es5 / name
        out += [str(p.relative_to(es5)) for p in sorted(path.rglob("*.js"))] if path.is_dir() else [name]
    return out


# repository files published as pages of the site: page -> source, and source -> page for links
REPO_PAGES = {"readme.md": "README.md", "contributing.md": "CONTRIBUTING.md", "changelog.md": "CHANGELOG.md"}
SITE_PAGES = {**{source: page for page, source in REPO_PAGES.items()}, "notebooks/README.md": "notebooks/README.md"}

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _static_copy(nb_path: Path, out_dir: Path) -> Path:
    """The executed notebook as the site shows it: each slider widget replaced by the figure it drew
    when the notebook was executed, under a note naming its sliders (a static page runs no kernel)."""
    nb = json.loads(nb_path.read_text())
    state = nb.get("metadata", {}).pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    if not state:
        return nb_path
    for cell in nb["cells"]:
        outputs = []
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            outputs.extend([out] if view is None else _widget_outputs(view["model_id"], state))
        cell["outputs"] = outputs
    target = out_dir / "notebooks" / nb_path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(nb))
    return target


def _widget_outputs(model_id: str, state: dict) -> list[dict]:
    """The note and the stored outputs of one ``interact`` widget (its sliders and its Output child)."""
    children = [state.get(c.removeprefix("IPY_MODEL_"), {}) for c in state.get(model_id, {}).get("state", {}).get("children", [])]
    sliders, shown = [], []
    for child in children:
        s = child.get("state", {})
        if child.get("model_name", "").endswith("SliderModel"):
            value = s["_options_labels"][s["index"]] if "_options_labels" in s else s.get("value")
            sliders.append(f"{s.get('description', '')} = {value}")
        elif child.get("model_name") == "OutputModel":
            shown.extend(s.get("outputs", []))
    note = ("In a running notebook, sliders for " + ", ".join(sliders) +
            " redraw the figure below; here it shows those values.")
    return [{"output_type": "display_data", "metadata": {},
             "data": {"text/html": f'<p class="tabsim-widget-note">{html.escape(note)}</p>', "text/plain": note}}] + shown


class _RenamedFile(File):
    """A page whose source lies outside docs_dir under another name (the repository README)."""

    def __init__(self, path: str, source: Path, site_dir: str, urls: bool):
        super().__init__(path, src_dir=str(source.parent), dest_dir=site_dir, use_directory_urls=urls)
        self.abs_src_path = str(source)


def on_page_markdown(markdown, page, config, files):
    """Rewrite links written for the repository so they point at the site's pages."""
    root = _root(config)
    docs = Path(config["docs_dir"]).resolve()
    src = page.file.src_uri
    # where the page's source lies in the repository
    if src in REPO_PAGES:
        here = root
    elif src.startswith("notebooks/") and src.endswith("README.md"):
        here = root / "notebooks"
    else:
        here = (docs / src).parent
    on_site = {f.src_uri for f in files}

    def fix(m):
        text, target = m.group(1), m.group(2)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo_path = (here / path).resolve()
        try:
            rel_docs = repo_path.relative_to(docs).as_posix()
        except ValueError:
            rel_docs = None
        if rel_docs is not None and rel_docs in on_site:
            site_path = rel_docs
        else:
            try:
                rel_root = repo_path.relative_to(root).as_posix()
            except ValueError:
                return m.group(0)
            mapping = SITE_PAGES
            if rel_root in mapping:
                site_path = mapping[rel_root]
            elif rel_root.startswith("notebooks/") and rel_root.endswith(".py") \
                    and f"notebooks/{Path(rel_root).stem}.ipynb" in on_site:
                site_path = f"notebooks/{Path(rel_root).stem}.ipynb"
            elif repo_path.exists():
                return f"{text} (`{rel_root}` in the repository)"
            else:
                return m.group(0)  # broken in the repository too: --strict reports it
        link = posixpath.relpath(site_path, posixpath.dirname(src) or ".")
        return f"[{text}]({link}{'#' + anchor if anchor else ''})"

    return LINK.sub(fix, markdown)


def _site_path(repo_path: Path, root: Path, docs: Path, on_site: set[str]) -> str | None:
    """The site page (its ``src_uri``) of a repository file, or None when the file is not on the site."""
    try:
        rel_docs = repo_path.relative_to(docs).as_posix()
        if rel_docs in on_site:
            return rel_docs
    except ValueError:
        pass
    try:
        rel_root = repo_path.relative_to(root).as_posix()
    except ValueError:
        return None
    mapping = SITE_PAGES
    if rel_root in mapping:
        return mapping[rel_root]
    if rel_root.startswith("notebooks/") and rel_root.endswith((".py", ".ipynb")):
        nb = f"notebooks/{Path(rel_root).stem}.ipynb"
        return nb if nb in on_site else None
    return None


def _dest(src_uri: str) -> str:
    """The built file of a page (``use_directory_urls: false``)."""
    stem, ext = posixpath.splitext(src_uri)
    if posixpath.basename(stem) in ("README", "index"):
        return posixpath.join(posixpath.dirname(stem), "index.html")
    return stem + ".html"


def _notebook_bar(stem: str, stems: list[str], titles: dict[str, str]) -> str:
    i = stems.index(stem)
    parts = []
    if i > 0:
        parts.append(f'<a href="{stems[i - 1]}.html">&larr; {html.escape(titles[stems[i - 1]])}</a>')
    parts.append('<a href="index.html">all notebooks</a>')
    parts.append(f'<a href="{stem}.ipynb" download>download the executed notebook (.ipynb)</a>')
    if i + 1 < len(stems):
        parts.append(f'<a href="{stems[i + 1]}.html">{html.escape(titles[stems[i + 1]])} &rarr;</a>')
    return '<nav class="tabsim-nb-bar">' + " · ".join(parts) + "</nav>"


def on_post_page(output, page, config):
    """Notebook pages: the bar, the figures as files opened at full size by a click, repository links."""
    src = page.file.src_uri
    if not (src.startswith("notebooks/") and src.endswith(".ipynb")):
        return output
    root, site = _root(config), Path(config["site_dir"])
    docs = Path(config["docs_dir"]).resolve()
    stem = Path(src).stem
    on_site = {f.src_uri for f in _FILES}
    stems = sorted(Path(u).stem for u in on_site if re.fullmatch(r"notebooks/\d\d_\w+\.ipynb", u))
    # the titles the navigation gives the notebooks ("2. The self-consistency crossover")
    titles = {Path(p.file.src_uri).stem: p.title for p in (page.previous_page, page.next_page)
              if p is not None and p.file is not None}
    titles = {s: titles.get(s, f"{s[:2]} · {s[3:].replace('_', ' ')}") for s in stems}

    def fix_href(m):
        target = html.unescape(m.group(2))
        path, _, anchor = target.partition("#")
        if not path or path.endswith(".html") or not path.endswith((".md", ".py", ".ipynb")):
            return m.group(0)
        dest = _site_path((root / "notebooks" / path).resolve(), root, docs, on_site)
        if dest is None:
            return m.group(0)  # check_html.py reports a link that goes nowhere
        link = posixpath.relpath(_dest(dest), "notebooks")
        return m.group(1) + html.escape(link + (f"#{anchor}" if anchor else "")) + m.group(3)

    output = HREF.sub(fix_href, output)

    figures = site / "notebooks" / "figures"
    figures.mkdir(parents=True, exist_ok=True)

    def figure(m):
        data = base64.b64decode(m.group(2))
        name = f"{stem}-{hashlib.sha1(data).hexdigest()[:10]}.png"
        (figures / name).write_bytes(data)
        return (f'<a class="tabsim-figure" href="figures/{name}" target="_blank" title="open the full-size figure">'
                f'<img{m.group(1)}src="figures/{name}"{m.group(3)}></a>')

    output = PNG.sub(figure, output)
    bar = _notebook_bar(stem, stems, titles)
    output = output.replace("</h1>", "</h1>" + bar, 1)
    return output.replace("</article>", bar + "</article>", 1)


_FILES: list = []  # the site's files, kept by on_files for on_post_page


def on_page_content(html_text, page, config, files):
    """Inline the grid of each interactive figure (browsers do not let a page read files from disk)."""
    docs = Path(config["docs_dir"]).resolve()

    def inline(m):
        data = (docs / m.group(1)).read_text().strip().replace("</", "<\\/")
        return m.group(0) + f'<script type="application/json" class="tabsim-vega-data">{data}</script>'

    return GRID_DIV.sub(inline, html_text)
