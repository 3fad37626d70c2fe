"""``verbeval report-table``: a CSV table as an HTML page of the Snakemake report."""

from __future__ import annotations

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
    assert warning in page and page.index(warning) < page.index("<table>")
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
    """comparisons.csv's page: a row that is not significant with a finite mdd says the smallest
    difference it would have detected; a significant row and one without an mdd keep True / False."""
    csv = tmp_path / "comparisons.csv"
    csv.write_text(
        "model_a,model_b,group,metric,difference,significant,correction,mdd\n"
        "a,b,g1,tse,0.01,False,holm,0.0341\n"
        "a,b,g1,ew,0.2,True,bonferroni,0.05\n"
        "a,b,g2,tse,0.0,False,holm,\n"
        "a,b,g2,mw,0.00001,False,bonferroni,0.00004\n"
    )
    cells = _cells(csv_page(csv, "Paired comparisons"))
    assert [c[5] for c in cells] == [
        "not significant, and a difference of 0.034 or more would have been detected",
        "True",
        "False",  # no discordant row: no mdd, nothing to say
        "not significant, and a difference of 4.00e-05 or more would have been detected",
    ]
    assert [c[7] for c in cells] == ["0.034", "0.050", "–", "4.00e-05"]  # the mdd column as it is
