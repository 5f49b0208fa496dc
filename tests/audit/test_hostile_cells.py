"""Cells and names a hostile or careless table carries: a doubled sign is refused naming the line and
the column, names led by a lookalike of a formula character are escaped in the CSVs, names the
figure's font cannot draw draw without warnings, and a table of many rows gets a figure of fixed size
and an estimate of the audit's length before it starts."""
import csv
import logging
import warnings

import matplotlib
import pytest

from tabsim.audit import figure as fig_mod
from tabsim.audit import load_entries
from tabsim.audit.core import audit
from tabsim.audit.report import write_outputs
from tabsim.audit.schema import AuditInputError

matplotlib.use("Agg")

HEAD = "source_id,paper,table,model,benchmark,samples_per_item,values,majority_kind,base,majority,true\n"


def table(tmp_path, models, cells=None, name="t.csv"):
    p = tmp_path / name
    rows = [f"s,P,T1,{m},MATH-500,greedy,gains,online,{cells or '40.0,+10.0,+20.0'}" for m in models]
    p.write_text(HEAD + "\n".join(rows) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize("cell", ["++28.8", "+-28.8", "-+28.8", "+\u221228.8"])
def test_a_cell_with_two_signs_is_refused_naming_line_and_column(tmp_path, cell):
    p = table(tmp_path, ["M"], cells=f"40.0,+10.0,{cell}")
    with pytest.raises(AuditInputError) as err:
        load_entries(p)
    msg = "\n".join(err.value.problems)
    assert "line 2" in msg and "arms.true" in msg and "two signs" in msg, msg


LOOKALIKES = ["\uff1d1+1", "\uff0bx", "\uff0dx", "\uff20SUM(A1)", "\ufe66x", "\ufe62x", "\ufe63x", "\u207ax",
              "\u2212x", "\u2013x", "\u200b=x", "\ufeff@x", "\u207bx", "\u208bx"]


def test_names_led_by_a_lookalike_of_a_formula_character_are_escaped(tmp_path):
    models = LOOKALIKES + ["Qwen2.5-7B", "a=b"]
    res = audit(load_entries(table(tmp_path, [m.replace(",", "") for m in models])), calibrate=False)
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the figure's own warnings are the next test's
        write_outputs(res, out, files=[tmp_path / "t.csv"], command="tabsim audit t.csv")
    for name in ("audit.csv", "terms.csv", "entries.csv"):
        with open(out / name, newline="", encoding="utf-8") as fh:
            got = {row["model"] for row in csv.DictReader(fh)}
        assert {"'" + m for m in LOOKALIKES} <= got, (name, got)
        assert {"Qwen2.5-7B", "a=b"} <= got  # ordinary names stay as they are


def test_every_character_that_normalises_to_a_formula_lead_is_escaped():
    """The whole class: any first character whose compatibility form (NFKC, as a spreadsheet may fold it)
    starts with ``= + - @``, a minus sign or a dash, and a tab or carriage return first."""
    import sys
    import unicodedata

    import pandas as pd

    from tabsim.audit.report import csv_safe, formula_led

    def lead(c):
        n = unicodedata.normalize("NFKC", c)[:1]
        return n in ("=", "+", "-", "@", "\u2212") or (n != "" and unicodedata.category(n) == "Pd")

    # only a character with a compatibility decomposition changes under NFKC (Hangul syllables aside)
    maybe = (c for c in map(chr, range(sys.maxunicode + 1))
             if unicodedata.decomposition(c) or unicodedata.category(c) == "Pd" or c in "=+-@\u2212")
    leads = [c for c in maybe if lead(c)]
    assert {"\uff0b", "\uff0d", "\uff20", "\uff1d", "\u207b", "\u208b"} <= set(leads)
    assert [c for c in leads if not formula_led(c + "SUM(A1)")] == []
    cells = [c + "x" for c in leads] + ["\tx", "\rx", " \t=x"]
    got = csv_safe(pd.DataFrame({"model": cells, "d_null": -1.0}))
    assert (got["model"] == ["'" + c for c in cells]).all() and (got["d_null"] == -1.0).all()
    assert not formula_led("Qwen2.5-7B") and not formula_led("a=b") and not formula_led("\u00b1x")


def test_names_the_font_cannot_draw_draw_without_warnings(tmp_path, caplog):
    res = audit(load_entries(table(tmp_path, ["\uff1dM", "\uff0bM", "\uff0dM", "\uff20M", "\u4e2d$x$"])),
                calibrate=False)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")
        fig = fig_mod.plot_terms(res)
        fig.canvas.draw()
    assert not [r for r in caplog.records if "Glyph" in r.getMessage()]
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert any(lb.startswith("=M") for lb in labels) and any("U+4E2D" in lb for lb in labels), labels
    matplotlib.pyplot.close(fig)


def test_many_rows_give_a_figure_of_fixed_size(tmp_path, monkeypatch):
    monkeypatch.setattr(fig_mod, "MAX_MODEL_ROWS", 3)
    sizes = []
    for n in (4, 12):
        res = audit(load_entries(table(tmp_path, [f"M{i}" for i in range(n)], name=f"t{n}.csv")), calibrate=False)
        f = fig_mod.plot_terms(res)
        sizes.append(tuple(f.get_size_inches()))
        assert "12 rows" in f._suptitle.get_text() or n == 4
        matplotlib.pyplot.close(f)
    assert sizes[0] == sizes[1]
    assert "distribution over the 12 rows" in fig_mod.figure_note(12)


def test_the_audit_says_its_expected_length_before_it_starts(tmp_path):
    lines = []
    audit(load_entries(table(tmp_path, ["A", "B"])), calibrate=False, log=lines.append)
    first = next(i for i, ln in enumerate(lines) if ln.startswith("bounds and verdicts"))
    assert "expected about" in lines[first] and "5 passes" in lines[first], lines
    assert not any(ln.startswith("fragility") for ln in lines[:first])
