"""Input read the way papers write it, and checked against what the benchmark can give: scales
(fractions and percents), item counts from the benchmark registry, scores impossible for greedy
decoding, paper notation (Unicode minus, dashes, %, pass@1 headers, signs without a values column),
and one file for several training sets."""
import re
from pathlib import Path

import pytest

from tabsim.audit import load_entries
from tabsim.audit.core import audit
from tabsim.audit.schema import AuditInputError

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def yaml_table(tmp_path, body, defaults="benchmark: MATH-500, samples_per_item: greedy, values: absolute",
               name="t.yaml"):
    return write(tmp_path, name, "source: {id: s, paper: P, table: T1}\n"
                                 f"defaults: {{{defaults}}}\nentries:\n" + body)


def errors_of(*paths):
    with pytest.raises(AuditInputError) as err:
        load_entries(list(paths))
    return "\n".join(err.value.problems)


# ---------------------------------------------------------------------------------------------- scales
def test_a_table_of_fractions_is_not_read_as_tiny_percents(tmp_path):
    body = "  - {model: M, arms: {base: 0.44, majority: 0.48, true: 0.58}}\n"
    msg = errors_of(yaml_table(tmp_path, body, defaults="benchmark: B, n_items: 100, samples_per_item: greedy, "
                                                        "values: absolute, majority_kind: online"))
    assert "scale: not declared" in msg and "every accuracy of the table lies in [0, 1]" in msg
    assert "scale: fraction or scale: percent" in msg
    e = load_entries(yaml_table(tmp_path, body, name="f.yaml",
                                defaults="benchmark: B, n_items: 100, samples_per_item: greedy, values: absolute, "
                                         "majority_kind: online, scale: fraction"))[0]
    assert e.scale == "fraction" and e.arms["frozen"].mean == pytest.approx(44.0)
    assert e.arms["true"].mean == pytest.approx(58.0)


def test_one_fraction_among_percents_is_refused_naming_the_cell(tmp_path):
    msg = errors_of(yaml_table(tmp_path, "  - {model: M, gamma: 0.5, majority_kind: offline, "
                                         "arms: {base: 49.4, random: 70.8, majority: 76.0, true: 0.588}}\n"))
    assert "arms.true: 0.588 is about 100 times smaller than the rest of its row" in msg and "write 58.8" in msg


def test_a_percent_in_a_fraction_table_is_refused(tmp_path):
    msg = errors_of(yaml_table(tmp_path, "  - {model: M, majority_kind: online, arms: {base: 0.494, majority: 0.55, "
                                         "true: 58.8}}\n",
                               defaults="benchmark: B, n_items: 100, samples_per_item: greedy, values: absolute, "
                                        "scale: fraction"))
    assert "arms.true: 58.8 is outside [0, 1]" in msg and "write 0.588" in msg


# ------------------------------------------------------------------------------------------ item counts
def test_named_benchmark_fills_and_checks_n_items(tmp_path):
    e = load_entries(yaml_table(tmp_path, "  - {model: M, arms: {base: 49.4, true: 78.2}}\n"))[0]
    assert e.n_items == 500 and e.n_items_from == "registry"
    # an AIME row inheriting a default of 500 items
    aime = yaml_table(tmp_path, "  - {model: M, benchmark: AIME 2024, arms: {base: 16.7, true: 43.3}}\n",
                      defaults="benchmark: MATH-500, n_items: 500, samples_per_item: greedy, values: absolute",
                      name="a.yaml")
    msg = errors_of(aime)
    assert "n_items: 500 contradicts the registry's AIME 2024 (30 items)" in msg and "n_items_override" in msg
    big = yaml_table(tmp_path, "  - {model: M, n_items: 5000, arms: {base: 49.4, true: 78.2}}\n", name="b.yaml")
    assert "n_items: 5000 contradicts the registry's MATH-500 (500 items)" in errors_of(big)
    ok = yaml_table(tmp_path, "  - {model: M, n_items: 5000, n_items_override: the full MATH test set, "
                              "arms: {base: 49.4, true: 78.2}}\n", name="c.yaml")
    e = load_entries(ok)[0]
    assert e.n_items == 5000 and e.n_items_from == "override: the full MATH test set"


def test_registry_spellings_and_unknown_benchmarks(tmp_path):
    from tabsim.audit.benchmarks import lookup

    assert lookup("AIME24").n_items == 30 and lookup("aime_2025").n_items == 30
    assert lookup("MATH500").n_items == 500 and lookup("GPQA Diamond").n_items == 198
    assert lookup("GSM8K").n_items == 1319 and lookup("AMC").n_items == 83
    assert lookup("AMC23") is None  # a different, 40-problem set
    msg = errors_of(yaml_table(tmp_path, "  - {model: M, benchmark: MyBench, arms: {base: 40, true: 50}}\n"))
    assert "n_items: missing" in msg and "MATH-500 (500)" in msg


def test_greedy_score_impossible_on_n_items_is_flagged(tmp_path):
    p = yaml_table(tmp_path, "  - {model: M, benchmark: AIME 2024, arms: {base: 3.3, true: 7.7}}\n")
    e = load_entries(p)[0]
    assert len(e.flags) == 1 and "arms.true: 7.7 is not a possible greedy score on 30 items" in e.flags[0]
    assert "likely avg@k" in e.flags[0]
    row = audit([e], calibrate=False).audit.iloc[0]
    assert "likely avg@k" in row["input_flags"]
    # rounded or truncated multiples of 1/n are fine, and so are avg@k scores
    assert load_entries(yaml_table(tmp_path, "  - {model: M, benchmark: AIME 2024, arms: {base: 3.3, true: 43.3}}\n",
                                   name="ok.yaml"))[0].flags == ()
    assert load_entries(yaml_table(tmp_path, "  - {model: M, benchmark: GSM8K, arms: {base: 26.15, true: 89.76}}\n",
                                   name="trunc.yaml"))[0].flags == ()
    avg = yaml_table(tmp_path, "  - {model: M, benchmark: AIME 2024, samples_per_item: avg@16, "
                               "arms: {base: 3.3, true: 7.7}}\n", name="avg.yaml")
    assert load_entries(avg)[0].flags == ()


def test_every_registered_count_is_cited_in_the_docs():
    from tabsim.audit.benchmarks import BENCHMARKS

    doc = (ROOT / "docs" / "audit.md").read_text()
    section = doc[doc.index("## Known benchmarks"):]
    for b in BENCHMARKS:
        line = next((ln for ln in section.splitlines() if ln.startswith(f"| {b.name} |")), None)
        assert line is not None, b.name
        assert f"| {b.n_items:,} |" in line or f"| {b.n_items} |" in line, line
        assert len(line.split("|")[3].strip()) > 20, line  # a source, not a blank


def test_integer_samples_per_item_must_say_avg_or_pass(tmp_path):
    msg = errors_of(yaml_table(tmp_path, "  - {model: M, samples_per_item: 8, arms: {base: 40, true: 50}}\n"))
    assert "write avg@8 or pass@8" in msg
    e = load_entries(yaml_table(tmp_path, "  - {model: M, samples_per_item: pass@8, arms: {base: 40, true: 50}}\n",
                                name="p.yaml"))[0]
    assert e.protocol == "pass" and e.n_eff == 500  # pass@k scores one outcome per item


# ----------------------------------------------------------------------------------------- notation
def test_paper_notation_is_read(tmp_path):
    csv = write(tmp_path, "n.csv",
                "source_id,paper,table,model,benchmark,samples_per_item,majority_kind,gamma,base (pass@1),"
                "true pass@1,majority,random,format\n"
                "s,P,T,Llama,MATH-500,greedy,offline,0.5,36.8,+11.0,+11.6,\u22124.9,\u2014\n"
                "s,P,T,OLMo,MATH-500,greedy,offline,0.5,9.0%,+13.9,\u20137.4,-8.5,-\n")
    a, b = load_entries(csv)
    assert a.values == "gains"  # read from the signs: no values column
    assert a.arms["random"].mean == pytest.approx(36.8 - 4.9) and "format" not in a.arms
    assert b.arms["frozen"].mean == pytest.approx(9.0) and b.arms["majority"].mean == pytest.approx(9.0 - 7.4)
    assert b.arms["true"].mean == pytest.approx(22.9) and "format" not in b.arms
    y = yaml_table(tmp_path, "  - {model: M, gamma: 0.5, majority_kind: offline, arms: {base: '49.4%', "
                             "random: '+21.4', majority: '\u22121.0', true: '+28.8', format: '\u2014'}}\n",
                   defaults="benchmark: MATH-500, samples_per_item: greedy")
    e = load_entries(y)[0]
    assert e.values == "gains" and e.arms["majority"].mean == pytest.approx(48.4) and "format" not in e.arms


def test_mixed_signs_without_values_say_the_fix(tmp_path):
    csv = write(tmp_path, "m.csv", "source_id,paper,table,model,benchmark,samples_per_item,base,true,majority\n"
                                   "s,P,T,M,MATH-500,greedy,40.0,+5.0,44.0\n")
    msg = errors_of(csv)
    assert "values: not declared" in msg and "declare values: gains" in msg


def test_one_file_holds_several_training_sets(tmp_path):
    p = yaml_table(tmp_path, "  - {model: M, train_set: MATH, arms: {base: 49.4, true: 78.2}}\n"
                             "  - {model: M, train_set: DAPO-17k, arms: {base: 49.4, true: 74.2}}\n")
    res = audit(load_entries(p), calibrate=False)
    assert sorted(res.audit["train_set"]) == ["DAPO-17k", "MATH"]
    assert set(res.terms["train_set"]) == {"DAPO-17k", "MATH"}
    dup = yaml_table(tmp_path, "  - {model: M, train_set: MATH, arms: {base: 49.4, true: 78.2}}\n"
                               "  - {model: M, train_set: MATH, arms: {base: 49.4, true: 74.2}}\n", name="d.yaml")
    assert re.search(r"entry given twice.*train_set 'MATH'", errors_of(dup))


def test_protocol_declared_per_benchmark(tmp_path):
    p = yaml_table(tmp_path, "  - {model: M, arms: {base: 72.4, true: 82.6}}\n"
                             "  - {model: M, benchmark: AMC, arms: {base: 20.93, true: 54.22}}\n"
                             "  - {model: M, benchmark: AIME24, arms: {base: 3.3, true: 10.0}}\n",
                   defaults="benchmark: MATH-500, values: absolute, "
                            "samples_per_item: {MATH-500: greedy, AMC: avg@8, AIME 2024: pass@4}")
    math500, amc, aime = load_entries(p)
    assert (math500.decoding, amc.decoding, aime.decoding) == ("greedy", "avg@8", "pass@4")
    q = yaml_table(tmp_path, "  - {model: M, benchmark: GSM8K, arms: {base: 72.4, true: 82.6}}\n", name="q.yaml",
                   defaults="values: absolute, samples_per_item: {MATH-500: greedy, AMC: avg@8}")
    assert "the mapping gives no protocol for benchmark 'GSM8K'; it has MATH-500, AMC" in errors_of(q)


def test_a_bare_dash_in_block_yaml_says_the_fix(tmp_path):
    p = write(tmp_path, "d.yaml", "source: {id: s, paper: P, table: T1}\n"
                                  "defaults: {benchmark: MATH-500, samples_per_item: greedy, values: absolute}\n"
                                  "entries:\n  - model: M\n    arms:\n      base: 40.0\n      random: -\n")
    assert "write it quoted, '-', or leave the arm out" in errors_of(p)
    q = write(tmp_path, "e.yaml", "source: {id: s, paper: P, table: T1}\n"
                                  "defaults: {benchmark: MATH-500, samples_per_item: greedy, values: absolute, "
                                  "scale: percents}\nentries:\n  - {model: M, arms: {base: 40.0, true: 50.0}}\n")
    msg = errors_of(q)
    assert "scale: 'percents' is not allowed; allowed: percent, fraction" in msg and "not declared" not in msg


# ------------------------------------------------------------------------------- silent accepts refused
CSV_HEAD = "source_id,paper,table,model,benchmark,n_items,samples_per_item,values,gamma,base,random,true\n"


def test_one_item_is_not_an_evaluation_set(tmp_path):
    body = "  - {model: M, n_items: 1, arms: {base: 49.4, true: 60.1}}\n"
    msg = errors_of(yaml_table(tmp_path, body, defaults="benchmark: B, samples_per_item: greedy, values: absolute"))
    assert "n_items: 1 item(s) cannot give a reported accuracy" in msg and ">= 2" in msg


def test_a_count_written_as_a_string_is_refused(tmp_path):
    body = '  - {model: M, n_items: "500", arms: {base: 49.4, true: 60.1}}\n'
    msg = errors_of(yaml_table(tmp_path, body, defaults="benchmark: B, samples_per_item: greedy, values: absolute"))
    assert "n_items: '500' is a string" in msg and "not counts" in msg
    ok = write(tmp_path, "ok.csv", CSV_HEAD + "t,P,T1,M,B,500,greedy,absolute,0.5,40.0,41.0,50.0\n")
    assert load_entries(ok)[0].n_items == 500  # a CSV's cells are text: its counts are read as numbers


def test_a_csv_row_one_cell_short_is_refused_naming_the_line(tmp_path):
    p = write(tmp_path, "short.csv", CSV_HEAD + "t,P,T1,M,B,500,greedy,absolute,0.5,40.0,41.0,50.0\n"
                                                "t,P,T1,M2,B,500,greedy,absolute,0.5,40.0,41.0\n")
    msg = errors_of(p)
    assert "line 3" in msg and "11 cells but 12 columns" in msg


def test_a_csv_with_a_header_and_no_rows_is_refused(tmp_path):
    msg = errors_of(write(tmp_path, "head.csv", CSV_HEAD))
    assert "no data rows" in msg
    msg = errors_of(write(tmp_path, "head2.csv", "# a comment\n" + CSV_HEAD + "\n# nothing else\n"))
    assert "no data rows" in msg
