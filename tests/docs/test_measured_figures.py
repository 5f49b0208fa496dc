"""Each measured time of ``tabsim reproduce`` and of the test suite is stated in docs/performance.md only;
every other page links there (two pages giving two figures for the same run was the trouble)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "docs" / "performance.md"

# a duration: 5.4 s, 7 s, 3.6-4.1 s, 5 min 02 s, 0.2 to 0.6 s, about 5 minutes
TIME = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:\s*(?:-|–|to)\s*\d+(?:\.\d+)?)?\s*(?:s|secs?|seconds?|min|minutes?)(?![\w-])")
# what the figures are of: the reference study's command, and the test suite
SUBJECT = re.compile(r"\breproduce\b|\btest suite\b|\bthe suite\b|\.ci/run")
SENTENCE = re.compile(r"(?<=[.;!?])\s+(?=[A-Z(`*\[])")


def pages() -> list[Path]:
    """Every page a reader sees: the site's Markdown pages and the repository's own."""
    own = [ROOT / n for n in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "notebooks/README.md")]
    return [p for p in own if p.exists()] + sorted((ROOT / "docs").glob("*.md"))


def stated_times(text: str) -> list[str]:
    """The sentences of ``text`` that state a duration of the subject: the subject named in the sentence
    (a table row is a sentence), or, for prose, in the heading of its section (``## tabsim reproduce``)."""
    found, heading = [], ""
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        if lines and lines[0].startswith("#"):
            heading = lines[0]
        if lines and all(line.lstrip().startswith("|") for line in lines):
            found += [line for line in lines if TIME.search(line) and SUBJECT.search(line)]
            continue
        for sentence in SENTENCE.split(" ".join(block.split())):
            if TIME.search(sentence) and (SUBJECT.search(sentence) or SUBJECT.search(heading)):
                found.append(sentence)
    return found


def test_times_of_reproduce_and_the_suite_are_stated_in_performance_only():
    bad = {p.relative_to(ROOT).as_posix(): stated_times(p.read_text()) for p in pages() if p != HOME}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"state these in docs/performance.md and link to it: {bad}"
    assert stated_times(HOME.read_text()), "docs/performance.md states no time of reproduce or the suite"


def test_the_check_finds_a_time_stated_elsewhere():
    assert stated_times("Warm, `tabsim reproduce` takes 5.4 s on two cores.")
    assert stated_times("The test suite takes about 5 minutes (5 min 02 s to 5 min 12 s).")
    assert stated_times("## tabsim reproduce\n\nIt rebuilds the study. About 7 s end to end on two cores.")
    assert stated_times("| `tabsim reproduce`, cache filled | 3.6-4.1 s |")
    assert not stated_times("`tabsim reproduce` exits within about a second of Ctrl-C; its report is [here](x.md).")
    assert not stated_times("## Outputs\n\nA chunk longer than 1.4 s of work runs in segments.")


def test_pages_that_speak_of_those_times_link_to_performance():
    for name in ("README.md", "docs/cli.md"):
        assert "performance.md" in (ROOT / name).read_text(), name
