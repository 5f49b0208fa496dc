"""The documentation site needs no network (system fonts, search from disk through mkdocs-material's
offline plugin, the worker shim kept in the repository), and a first build says which notebook it is
executing. The built site itself is checked in tests/docs/test_site.py."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_site"))


class _Loader(yaml.SafeLoader):
    """mkdocs.yml may hold ``!!python/name`` tags; this check reads plain settings only."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def _config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)


def test_site_uses_system_fonts_and_searches_offline():
    cfg = _config()
    assert cfg["theme"]["name"] == "material" and cfg["theme"]["font"] is False
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in cfg["plugins"]]
    assert "search" in plugins and "offline" in plugins
    (shim,) = [s for s in cfg["extra"]["polyfills"] if "iframe-worker" in s]
    assert not shim.startswith(("http:", "https:", "//")) and (ROOT / "docs" / shim).is_file()
    assert cfg["use_directory_urls"] is False


def test_a_first_build_says_which_notebook_it_executes(tmp_path, monkeypatch, caplog):
    """One line per notebook executed (a first build runs all of them, for minutes); none when up to date."""
    pytest.importorskip("mkdocs")
    import hooks

    (tmp_path / "notebooks").mkdir()
    for name in ("01_first.py", "02_second.py", "03_third.py"):
        (tmp_path / "notebooks" / name).write_text("# %%\n")
    ran = []

    def fake_execute(source, target, **kw):
        ran.append(source.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("{}")

    monkeypatch.setattr(hooks, "execute_notebook", fake_execute)
    monkeypatch.setenv("TABSIM_NOTEBOOK_BUILD", str(tmp_path / "build"))
    config = {"config_file_path": str(tmp_path / "mkdocs.yml")}
    with caplog.at_level(logging.INFO, logger="mkdocs.hooks.tabsim"):
        assert len(hooks.executed_notebooks(config)) == 3
    lines = [r.getMessage() for r in caplog.records if r.name == "mkdocs.hooks.tabsim"]
    assert ran == ["01_first.py", "02_second.py", "03_third.py"]
    for i, name in enumerate(ran, 1):
        assert any(f"executing notebook {i}/3: notebooks/{name}" in line for line in lines), lines
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mkdocs.hooks.tabsim"):
        hooks.executed_notebooks(config)
    assert ran == ["01_first.py", "02_second.py", "03_third.py"] and not caplog.records


def test_notebook_pages_load_mathjax_from_the_site():
    """mkdocs-jupyter's MathJax comes from the site (before: an empty or CDN script source, a failed fetch
    on a page opened from disk); the hook publishes the file the pages name, from an installed package."""
    pytest.importorskip("mkdocs")
    import hooks

    (jupyter,) = [p["mkdocs-jupyter"] for p in _config()["plugins"] if isinstance(p, dict) and "mkdocs-jupyter" in p]
    url = jupyter.get("custom_mathjax_url", "")
    assert url and not url.startswith(("http:", "https:", "//")), url
    # the notebook pages are notebooks/NAME.html: the URL resolves to a file the hook copies
    target = url.split("?")[0].removeprefix("../")
    assert target.startswith(hooks.MATHJAX_DIR + "/")
    files = hooks.mathjax_files()
    assert target.removeprefix(hooks.MATHJAX_DIR + "/") in files
    assert all((hooks.mathjax_root() / f).is_file() for f in files)


def test_a_first_build_runs_its_kernels_over_unix_sockets(tmp_path, monkeypatch):
    """Over TCP each kernel logged 'Kernel is running over TCP without encryption' (7 warnings in a
    first build): the hook's kernels use Unix sockets."""
    pytest.importorskip("mkdocs")
    import nbclient

    import hooks

    seen = {}

    class FakeClient:
        def __init__(self, nb, **kw):
            seen.update(kw)

        def execute(self):
            return None

    monkeypatch.setattr(nbclient, "NotebookClient", FakeClient)
    source = tmp_path / "01_x.py"
    source.write_text("# %%\n1 + 1\n")
    hooks.execute_notebook(source, tmp_path / "out" / "01_x.ipynb")
    assert seen["config"].KernelManager.transport == "ipc", seen
    assert (tmp_path / "out" / "01_x.ipynb").is_file()


def test_the_build_line_silences_the_end_of_life_banner():
    readme = (ROOT / "README.md").read_text()
    assert "NO_MKDOCS_2_WARNING=1 mkdocs build --strict" in readme
