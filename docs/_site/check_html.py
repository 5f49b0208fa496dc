"""Checks of the built site that ``mkdocs build --strict`` does not make.

* **Nothing left unrendered.** Text outside code (``<pre>``, ``<code>``) holds no code-fence markers
  (```` ``` ````, ``~~~``) and no raw Markdown: no ``[text](target)`` links, no ``**bold**``, no
  ``#`` heading or ``|---|`` table lines. A fence whose info string the renderer does not accept is
  shown as a paragraph of text: this is how it is caught.
* **Every in-page anchor resolves.** An ``href="#x"`` names an ``id`` of the same page, and an
  ``href="page.html#x"`` to a page of the site names an ``id`` of that page; a relative link goes to a
  file of the site (``--strict`` checks the Markdown pages' links, not those of the notebook pages).

Run it on a built site: ``python docs/_site/check_html.py build/site`` (exit status 1 and one line per
problem when it finds any). ``tests/docs/test_site.py`` runs it on the site it builds.
"""
from __future__ import annotations

import posixpath
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# raw Markdown that a rendered page never shows outside code
RAW_MARKDOWN = {
    "code fence": re.compile(r"```|~~~"),
    "Markdown link": re.compile(r"\[[^\]\n]+\]\([^)\s]+\)"),
    "Markdown bold": re.compile(r"(?<![\w*])\*\*[^*\n]+\*\*(?![\w*])"),
    "Markdown heading": re.compile(r"(?:^|\n)\s*#{1,6} \S"),
    "Markdown table rule": re.compile(r"\|\s*:?-{3,}"),
}
CODE_TAGS = {"pre", "code", "script", "style", "textarea", "svg", "math"}
CODE_CLASSES = {"clipboard-copy-txt"}  # mkdocs-jupyter's hidden copy of a cell's source, for its copy button
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
SKIP_DIRS = {"assets", "search"}


class _Page(HTMLParser):
    """The ids, the links and the text outside code of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.text: list[str] = []
        self._stack: list[tuple[str, bool]] = []  # open tags, and whether each one holds code
        self._in_code = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])
        if tag in VOID:
            return
        code = tag in CODE_TAGS or bool(CODE_CLASSES & set((a.get("class") or "").split()))
        self._stack.append((tag, code))
        self._in_code += code

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self._stack and self._stack[-1][0] == tag:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag not in (t for t, _ in self._stack):
            return
        while self._stack:
            t, code = self._stack.pop()
            self._in_code -= code
            if t == tag:
                break

    def handle_data(self, data):
        if not self._in_code and data.strip():
            self.text.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    page.close()
    return page


def pages(site: Path) -> list[Path]:
    """The HTML pages of a built site (the theme's assets and the search index left out)."""
    return sorted(p for p in site.rglob("*.html") if not SKIP_DIRS & set(p.relative_to(site).parts[:-1]))


def html_problems(site: Path) -> list[str]:
    """One line per unrendered Markdown text or unresolved in-page anchor in the site built at ``site``."""
    site = Path(site)
    parsed = {p.relative_to(site).as_posix(): _parse(p) for p in pages(site)}
    out = []
    for rel, page in parsed.items():
        for text in page.text:  # one report per text node and kind
            for what, pattern in RAW_MARKDOWN.items():
                m = pattern.search(text)
                if m:
                    snippet = " ".join(text[max(0, m.start() - 30):m.end() + 30].split())
                    out.append(f"{rel}: {what} left in the text: ...{snippet}...")
        for href in page.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc:
                continue
            if parts.path:
                base = "" if parts.path.startswith("/") else posixpath.dirname(rel)  # 404.html: site-absolute
                target = posixpath.normpath(posixpath.join(base, unquote(parts.path).lstrip("/")))
                if not (site / target).is_file():
                    out.append(f"{rel}: link {href} goes to no file of the site")
                    continue
                if target not in parsed or not parts.fragment:
                    continue  # not a page (an image, a download), or no anchor to check
            else:
                target = rel
            if unquote(parts.fragment) not in parsed[target].ids:
                out.append(f"{rel}: link {href} names no anchor of {target}")
    return out


if __name__ == "__main__":
    problems = html_problems(Path(sys.argv[1] if len(sys.argv) > 1 else "build/site"))
    print("\n".join(problems) if problems else "no problems")
    print(f"{len(problems)} problems", file=sys.stderr)
    sys.exit(1 if problems else 0)
