"""Numbers read as the paper wrote them, whatever the file format: a signed cell is a gain (an
unquoted ``+58.8`` in YAML included), mixed rows are refused and all-signed rows accepted, only ASCII
digits are numbers, and a base pass@k below the base's pass@1 is refused with the cell named."""
from pathlib import Path

import pytest

from tabsim.audit import load_entries
from tabsim.audit.core import audit
from tabsim.audit.notation import MINUS_SIGNS, MISSING_MARKS
from tabsim.audit.schema import AuditInputError

SRC = "source: {id: s, paper: P, table: T1}\n"
DEFAULTS = "defaults: {benchmark: MATH-500, samples_per_item: greedy, majority_kind: offline, gamma: 0.5}\n"
CSV_HEAD = "source_id,paper,table,model,benchmark,samples_per_item,majority_kind,gamma,base,true,majority,random\n"


def yaml_row(tmp_path: Path, arms: str, extra: str = "", name: str = "t.yaml") -> Path:
    p = tmp_path / name
    p.write_text(SRC + DEFAULTS + f"entries:\n  - {{model: M, {extra}arms: {arms}}}\n", encoding="utf-8")
    return p


def csv_row(tmp_path: Path, cells: str, head: str = CSV_HEAD, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(head + "s,P,T1,M,MATH-500,greedy,offline,0.5," + cells + "\n", encoding="utf-8")
    return p


def errors_of(path) -> str:
    with pytest.raises(AuditInputError) as err:
        load_entries(path)
    return "\n".join(err.value.problems)


# ------------------------------------------------------------------------------------------- signs
def test_an_unquoted_plus_in_yaml_is_a_gain(tmp_path):
    # the row: +58.8 is a gain, and 49.4 + 58.8 is over 100, so the row is refused (it was read as
    # an absolute true = 58.8 and audited)
    msg = errors_of(yaml_row(tmp_path, "{base: 49.4, true: +58.8, majority: +26.5, random: +21.4}"))
    assert "arms.true: accuracy 108.2 is outside [0, 100]" in msg and "base 49.4 + gain" in msg
    # the published row, signs unquoted: read as gains, with the verdict of the gains
    ok = load_entries(yaml_row(tmp_path, "{base: 49.4, true: +28.8, majority: +26.5, random: +21.4}",
                               name="ok.yaml"))[0]
    assert ok.values == "gains" and ok.arms["true"].mean == pytest.approx(78.2)
    assert ok.arms["random"].mean == pytest.approx(70.8)
    assert audit([ok], calibrate=False).audit.iloc[0]["verdict"] == "RANDOM_REWARD_DOMINATED"


def test_an_unquoted_sign_in_yaml_is_refused_in_an_absolute_entry(tmp_path):
    msg = errors_of(yaml_row(tmp_path, "{base: 49.4, true: +28.8, majority: 75.9}", extra="values: absolute, "))
    assert "arms.true: +28.8 is written as a signed gain but the entry declares values: absolute" in msg


@pytest.mark.parametrize("fmt", ["yaml", "csv"])
def test_a_mix_of_signed_and_unsigned_cells_is_refused(tmp_path, fmt):
    path = (yaml_row(tmp_path, "{base: 49.4, true: +28.8, majority: 75.9, random: 70.8}") if fmt == "yaml"
            else csv_row(tmp_path, "49.4,+28.8,75.9,70.8"))
    msg = errors_of(path)
    assert "values: not declared" in msg and "signed gains (true)" in msg and "unsigned values (majority, random)" in msg


@pytest.mark.parametrize("fmt", ["yaml", "csv"])
def test_an_all_signed_row_with_paper_minus_signs_is_read_as_gains(tmp_path, fmt):
    # U+2212 (minus sign) and U+2013 (en dash), as docs/audit.md says a paper may write a negative gain
    path = (yaml_row(tmp_path, "{base: 49.4, true: +28.8, majority: \u22121.0, random: \u20134.9}") if fmt == "yaml"
            else csv_row(tmp_path, "49.4,+28.8,\u22121.0,\u20134.9"))
    e = load_entries(path)[0]
    assert e.values == "gains"
    assert e.arms["true"].mean == pytest.approx(78.2)
    assert e.arms["majority"].mean == pytest.approx(48.4)
    assert e.arms["random"].mean == pytest.approx(44.5)


def test_the_docs_name_the_minus_signs_and_missing_marks_the_reader_accepts():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text(encoding="utf-8")
    notation = docs[docs.index("### Paper notation"):docs.index("### Scales")]
    for ch in ("\u2212", "\u2013"):  # the docs show both; the reader must take both
        assert f"{ch}4.9" in notation and ch in MINUS_SIGNS
    for ch in MINUS_SIGNS:  # and every sign the reader takes is in the docs
        assert f"`{ch}" in notation, ch
    for mark in MISSING_MARKS:
        assert f"`{mark}`" in notation or mark == "", mark


def test_an_unquoted_negative_yaml_number_is_a_signed_gain(tmp_path):
    e = load_entries(yaml_row(tmp_path, "{base: 49.4, true: +28.8, majority: -1.0, random: -4.9}"))[0]
    assert e.values == "gains" and e.arms["random"].mean == pytest.approx(44.5)


# ------------------------------------------------------------------------------------------ digits
@pytest.mark.parametrize("fmt", ["yaml", "csv"])
@pytest.mark.parametrize("text", ["\uff14\uff19.4", "\u0664\u0669.\u0664", "4\u0669.4"])
def test_only_ascii_digits_are_numbers(tmp_path, fmt, text):
    path = (yaml_row(tmp_path, f"{{base: '{text}', true: 78.2}}") if fmt == "yaml"
            else csv_row(tmp_path, f"{text},78.2,,", head=CSV_HEAD))
    msg = errors_of(path)
    assert "arms.base" in msg and repr(text) in msg and "ASCII digits" in msg


@pytest.mark.parametrize("field,value", [("n_items", "\uff15\uff10\uff10"), ("samples_per_item", "avg@\uff18")])
def test_only_ascii_digits_in_counts(tmp_path, field, value):
    head = "source_id,paper,table,model,benchmark,samples_per_item,n_items,n_items_override,base,true\n"
    spi, n = ("greedy", value) if field == "n_items" else (value, "")
    p = tmp_path / "c.csv"
    p.write_text(head + f"s,P,T1,M,Bench,{spi},{n},,49.4,78.2\n", encoding="utf-8")
    msg = errors_of(p)
    assert field in msg and repr(value) in msg


def test_only_ascii_digits_in_a_pass_at_k_key(tmp_path):
    msg = errors_of(yaml_row(tmp_path, "{base: 49.4, true: 78.2}", extra="base_pass_at_k: {'\uff18': 80.0}, "))
    assert "base_pass_at_k" in msg and "not supported" in msg


# ----------------------------------------------------------------------------------------- pass@k
@pytest.mark.parametrize("fmt", ["yaml", "csv"])
def test_a_pass_at_k_below_the_base_is_refused_naming_the_cell(tmp_path, fmt):
    if fmt == "yaml":
        path = yaml_row(tmp_path, "{base: 49.4, true: 78.2}", extra="base_pass_at_k: {8: 20.0}, ")
    else:
        path = csv_row(tmp_path, "49.4,78.2,,,20.0", head=CSV_HEAD.rstrip("\n") + ",base_pass_at_8\n")
    msg = errors_of(path)
    assert "base_pass_at_k.8: 20 is below the base's pass@1 (49.4)" in msg


def test_pass_at_k_grows_with_k_and_bounds_maj_at_k(tmp_path):
    msg = errors_of(yaml_row(tmp_path, "{base: 49.4, true: 78.2}", extra="base_pass_at_k: {4: 80.0, 8: 70.0}, "))
    assert "base_pass_at_k.8: 70 is below base_pass_at_k.4 (80)" in msg
    msg = errors_of(yaml_row(tmp_path, "{base: 49.4, true: 78.2}", name="m.yaml",
                             extra="base_pass_at_k: {8: 70.0}, base_maj_at_k: {8: 75.0}, "))
    assert "base_maj_at_k.8: 75 is above base_pass_at_k.8 (70)" in msg
    ok = load_entries(yaml_row(tmp_path, "{base: 49.4, true: 78.2}", name="ok.yaml",
                               extra="base_pass_at_k: {4: 70.0, 8: 80.0}, base_maj_at_k: {8: 60.0}, "))[0]
    assert ok.base_pass_at_k == {4: 70.0, 8: 80.0} and ok.base_maj_at_k == {8: 60.0}
