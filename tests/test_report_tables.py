"""``verbeval report-table``: a CSV table as an HTML page of the Snakemake report."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from verbeval.cli import main as verbeval_main
from verbeval.core.errors import InputError
from verbeval.workflow.report_tables import csv_page


def _cells(page: str) -> list[list[str]]:
    """The body rows of the page's table as cell texts."""
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body)]


def test_every_row_and_column_with_the_one_number_format(tmp_path: Path) -> None:
    csv = tmp_path / "table.csv"
    csv.write_text(
        "model,representation,layer,n,rho,kl,random_init\n"
        "gpt2,layer0,0,3500,0.317346,3.13575e-11,False\n"
        "gpt2,layer1,1,3499,-0.0229,,False\n"
        "a<b&c,static,-1,12,1.0,0.5,False\n"
    )
    page = csv_page(csv, "SimVerb-3500 (gpt2)")
    assert "<title>SimVerb-3500 (gpt2)</title>" in page and "<h1>SimVerb-3500 (gpt2)</h1>" in page
    head = re.findall(r"<th>(.*?)</th>", page)
    assert head == ["model", "representation", "layer", "n", "rho", "kl", "random_init"]
    assert _cells(page) == [
        ["gpt2", "layer0", "0", "3500", "0.317", "3.14e-11", "False"],
        ["gpt2", "layer1", "1", "3499", "-0.023", "–", "False"],  # a missing number: the tables' dash
        ["a&lt;b&amp;c", "static", "-1", "12", "1.000", "0.500", "False"],
    ]
    # numbers right-aligned, text not
    assert '<td class="num">0.317</td>' in page and "<td>layer0</td>" in page
    assert "randomly initialised" not in page  # no random model in the table


def test_a_random_models_numbers_are_named_above_the_table(tmp_path: Path) -> None:
    csv = tmp_path / "table.csv"
    csv.write_text("model,rho,random_init\nreal,0.5,False\ntiny-b,0.1,True\ntiny-a,0.0,True\n")
    page = csv_page(csv, "t")
    warning = "<p><strong>Randomly initialised, so the numbers are meaningless: tiny-a, tiny-b.</strong></p>"
    assert warning in page and page.index(warning) < page.index("<table")
    # a per-model table (no model column): the sentence names none
    csv.write_text("signature,accuracy,random_init\n+/+,0.5,True\n")
    assert "The model is randomly initialised, so the numbers are meaningless." in csv_page(csv, "t")


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match=r"missing\.csv: not a readable CSV table"):
        csv_page(tmp_path / "missing.csv", "t")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match=r"empty\.csv: not a readable CSV table"):
        csv_page(empty, "t")
    # the command: one page per --csv, with a title and an output each
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("x\n1\n")
    b.write_text("y\n2.5\n")
    args = ["-q", "report-table", "--csv", str(a), str(b), "--title", "A", "B"]
    assert verbeval_main([*args, "--out", str(tmp_path / "a.html"), str(tmp_path / "b.html")]) == 0
    assert "<h1>B</h1>" in (tmp_path / "b.html").read_text() and "2.500" in (tmp_path / "b.html").read_text()
    capsys.readouterr()
    assert verbeval_main([*args, "--out", str(tmp_path / "c.html")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["verbeval report-table: error: 2 --csv, 2 --title and 1 --out: give one of each per page"]
    assert not (tmp_path / "c.html").exists()


def test_no_field_taken_for_an_index_and_integers_stay_integers(tmp_path: Path) -> None:
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("model,n\ngpt2,2,7\nbert,3,8\n")  # a field more than the header in every row
    with pytest.raises(InputError) as err:
        csv_page(ragged, "t")
    assert str(err.value) == f"{ragged}: not a readable CSV table (a row has more fields than the header)"
    short = tmp_path / "short.csv"
    short.write_text("model,n,rho\ngpt2,2,0.5\nbert,,0.25\n")  # an integer column with an empty cell
    assert _cells(csv_page(short, "t")) == [["gpt2", "2", "0.500"], ["bert", "–", "0.250"]]


def test_one_html_table_builder() -> None:
    """Every HTML table of the report is built by verbeval.core.html_report: its cells escape text
    (markup only when asked), carry spans and classes, and no other module writes a table tag."""
    import verbeval
    from verbeval.core.html_report import cell, row, table

    assert cell("a<b", head=True, span={"colspan": 3}) == '<th colspan="3">a&lt;b</th>'
    assert cell(0.5, num=True) == '<td class="num">0.5</td>'
    assert cell("x<br>y", cls="correct", markup=True) == '<td class="correct">x<br>y</td>'
    assert cell() == "<td></td>"
    rows = [row([cell(1), cell(2)]), row([cell(3), cell(4)])]
    assert table(rows) == "<table><tr><td>1</td><td>2</td></tr><tr><td>3</td><td>4</td></tr></table>"
    assert table(rows[:1], head=[row([cell("h", head=True)])]) == (
        "<table>\n<thead><tr><th>h</th></tr></thead>\n<tbody>\n<tr><td>1</td><td>2</td></tr>\n</tbody>\n</table>"
    )
    pkg = Path(verbeval.__file__).parent
    writers = sorted(
        str(p.relative_to(pkg)) for p in pkg.rglob("*.py") if re.search(r"<(table|tr|td|th)[ >]", p.read_text())
    )
    assert writers == ["core/html_report.py"]


def test_a_comparison_that_is_not_significant_says_what_it_would_have_detected(tmp_path: Path) -> None:
    """comparisons.csv's page: a row that is not significant with a finite mdd says, in the sentence
    row below it, the smallest difference it would have detected; a significant row and one without
    an mdd say yes / no and have no sentence."""
    csv = tmp_path / "comparisons.csv"
    csv.write_text(
        "model_a,model_b,group,metric,difference,significant,correction,mdd\n"
        "a,b,g1,tse,0.01,False,holm,0.0341\n"
        "a,b,g1,ew,0.2,True,bonferroni,0.05\n"
        "a,b,g2,tse,0.0,False,holm,\n"
        "a,b,g2,mw,0.00001,False,bonferroni,0.00004\n"
    )
    cells = [c for c in _cells(csv_page(csv, "Paired comparisons")) if c]  # not the pair's heading row
    numbers = [c for c in cells if len(c) == len(COMPARISON_HEAD)]
    assert [(c[0], c[1], c[4], c[8], c[9]) for c in numbers] == [
        ("g1", "tse", "0.010", "0.034", "no"),
        ("g1", "ew", "0.200", "0.050", "yes"),
        ("g2", "tse", "0.000", "–", "no"),  # no discordant row: no mdd, nothing to say
        ("g2", "mw", "1.00e-05", "4.00e-05", "no"),
    ]
    sentences = [c[1] for c in cells if len(c) == 2]
    assert sentences == [
        "not significant, and a difference of 0.034 or more would have been detected",
        "not significant, and a difference of 4.00e-05 or more would have been detected",
    ]
    # each sentence is the row below its numbers
    assert cells[1] == ["", sentences[0]] and cells[5] == ["", sentences[1]]


#: the comparisons page's columns: the numbers first, models in the pair's heading row
COMPARISON_HEAD = [
    "group", "metric", "A", "B", "B - A", "99.5% interval", "p", "p adj.", "mdd", "significant", "n", "A / B only"
]  # fmt: skip

#: two rows of the quick start's comparisons.csv (SmolLM2 against the random quick-bert)
QUICK_COMPARISONS = (
    "kind,model_a,model_b,random_init_a,random_init_b,group,metric,value_a,value_b,difference,ci_low,ci_high,"
    "confidence,n,a_only,b_only,p_value,p_adjusted,significant,correction,mdd\n"
    "against_first,smollm2-135m,quick-bert,False,True,simple,tse,0.9866666667,0.5333333333,-0.4533333333,,,,"
    "75,35,1,1.076841727e-09,6.461050361e-09,True,holm,0.2858926144\n"
    "against_first,smollm2-135m,quick-bert,False,True,simple,ew,0.8604188482,0.5000906736,-0.3603281746,"
    "-0.4035692652,-0.318013128,0.995,100,,,,,True,bonferroni,0.0556040386\n"
    "against_first,smollm2-135m,quick-bert,False,True,subj_rel,tse,0.845,0.507,-0.338,,,,"
    "71,33,9,0.0002715392343,0.0004887940332,True,holm,0.32580887\n"
)


def test_the_comparisons_page_puts_the_numbers_first_and_names_the_random_model(tmp_path: Path) -> None:
    csv = tmp_path / "comparisons.csv"
    csv.write_text(QUICK_COMPARISONS)
    page = csv_page(csv, "Paired comparisons")
    warning = "<p><strong>† randomly initialised, so the numbers are meaningless: quick-bert.</strong></p>"
    assert warning in page and page.index(warning) < page.index("<table")
    assert re.findall(r"<th>(.*?)</th>", page.split("</thead>", 1)[0]) == COMPARISON_HEAD
    # the pair: one heading row, B (marked random) against A, and why it is compared
    assert re.findall(r'<th colspan="12" class="pair">(.*?)</th>', page) == [
        "B quick-bert† - A smollm2-135m (against the first model of Table 2)"
    ]
    assert [c for c in _cells(page) if c] == [
        ["simple", "tse", "0.987", "0.533", "-0.453", "–", "1.08e-09", "6.46e-09", "0.286", "yes", "75", "35 / 1"],
        ["simple", "ew", "0.860", "0.500", "-0.360", "[-0.404, -0.318]", "–", "–", "0.056", "yes", "100", "–"],
        # 0.000272 and 0.000489: in scientific notation like 1.08e-09, never 0.000
        ["subj_rel", "tse", "0.845", "0.507", "-0.338", "–", "2.72e-04", "4.89e-04", "0.326", "yes", "71", "33 / 9"],
    ]  # fmt: skip
    # a table of one level writes it once, in the header; of two, in each interval's cell
    csv.write_text(QUICK_COMPARISONS.replace(",0.995,", ",0.95,") + QUICK_COMPARISONS.splitlines()[2] + "\n")
    mixed = csv_page(csv, "Paired comparisons")
    assert "<th>interval</th>" in mixed and "<small>95%</small> [-0.404, -0.318]" in mixed
    assert "<small>99.5%</small> [-0.404, -0.318]" in mixed


def test_p_values_have_one_format() -> None:
    """Every page writes a p-value by format_p: 3 decimals from 0.001 up, 3 significant digits in
    scientific notation below, 0 as 0, a missing one as the tables' dash."""
    import pandas as pd

    from verbeval.core.tables import format_p, is_p_column

    assert [format_p(p) for p in (0.0002443970166, 1.076841727e-09, 4.5e-22, 0.000999)] == [
        "2.44e-04", "1.08e-09", "4.50e-22", "9.99e-04"
    ]  # fmt: skip
    assert [format_p(p) for p in (0.001, 0.0123, 0.05, 0.5, 1.0)] == ["0.001", "0.012", "0.050", "0.500", "1.000"]
    assert [format_p(p) for p in (0.0, float("nan"), None, pd.NA)] == ["0", "–", "–", "–"]
    assert [is_p_column(c) for c in ("p", "p_value", "p_adjusted", "mannwhitney_p", "rho", "top_p")] == [
        True, True, True, True, False, False  # top_p: a cutoff
    ]  # fmt: skip


def test_a_generic_page_writes_its_p_value_columns_by_the_one_format(tmp_path: Path) -> None:
    csv = tmp_path / "modes.csv"
    csv.write_text("mode,mannwhitney_u,mannwhitney_p,delta\na,12.0,0.000244,0.0002\nb,3.5,0.034,0.5\n")
    assert _cells(csv_page(csv, "t")) == [["a", "12.000", "2.44e-04", "0.000"], ["b", "3.500", "0.034", "0.500"]]


def test_the_report_s_first_page_holds_table2_and_opens_results_in_one_click(tmp_path: Path) -> None:
    """workflow/report/workflow.rst, rendered as Snakemake renders it (Jinja2 with the run's report
    items, then docutils): Table 2's page itself in a frame, a one-click link per result, and no
    docutils complaint (a line over 10,000 characters would drop the frame)."""
    from types import SimpleNamespace

    publish_parts = pytest.importorskip("docutils.core").publish_parts  # Snakemake's, as are Jinja2's
    Environment = pytest.importorskip("jinja2").Environment

    from conftest import REPO_ROOT

    rows = "".join(
        f"<tr><td>g{i}</td><td class='num'>0.{i:02d}<br><small>[0.1, 0.9]</small></td></tr>" for i in range(300)
    )
    table2 = tmp_path / "table2.html"
    table2.write_text(f"<!DOCTYPE html>\n<html><body><h1>Table 2</h1>\n<table>{rows}</table>\n</body></html>\n")
    assert max(len(line) for line in table2.read_text().splitlines()) > 10_000
    figure = tmp_path / "figures" / "fig1_top_p.png"
    items = [
        SimpleNamespace(target=table2.name, path=table2, mime="text/html"),
        SimpleNamespace(target=figure.name, path=figure, mime="image/png"),
        SimpleNamespace(target="comparisons.html", path=tmp_path / "comparisons.html", mime="text/html"),
        SimpleNamespace(target="table.csv", path=tmp_path / "table.csv", mime=None),
    ]
    config = {"models": [{"id": "gpt2"}, {"id": "m/bert", "name": "tiny-bert"}], "results_dir": "results"}
    env = Environment(trim_blocks=True, lstrip_blocks=True)  # as snakemake.report.auto_report's
    text = (REPO_ROOT / "workflow" / "report" / "workflow.rst").read_text()
    rst = env.from_string(text).render(snakemake=SimpleNamespace(config=config), categories={}, files=items)
    assert max(len(line) for line in rst.splitlines()) < 10_000
    body = publish_parts(rst, writer="html", settings_overrides={"report_level": 2, "halt_level": 2})["html_body"]
    frame = re.search(r'<iframe title="Table 2" srcdoc="([^"]*)"></iframe>', body)
    assert frame is not None
    page = html.unescape(frame.group(1))
    assert "<h1>Table 2</h1>" in page and page.count("<tr>") == 300 and "0.07<br>" in page
    assert "of gpt2, tiny-bert." in body
    links = dict((t, h) for h, t in re.findall(r'<a href="(javascript:[^"]*)">([^<]*)</a>', body))
    path = str(figure)
    assert links["Figure 1: EW and MW against top-p cutoff"] == (
        f"javascript:app.setView({{resultPath:'{path}',content:'img',contentPath:results['{path}'].data_uri}})"
    )
    assert "content:'html'" in links["Table 2"] and "content:'html'" in links["Paired comparisons"]
    # the rule graph below the text: the style element of the page
    assert "flex-direction:column" in body
