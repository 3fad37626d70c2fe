"""The Snakemake report of a finished run, opened in a real headless browser and clicked through.

A small run (two tiny randomly initialised models, a BERT and a GPT-2, on a word-level tokenizer of
the data, the ``simple`` group, 6 rows per template file, SimVerb-3500 and the released veridicality
probabilities) is built for just the results the report's first page leads to (Figure 2 aside, to
save a job): Table 2, the paired comparisons, Figure 1, SimVerb-3500's rho by layer and the
veridicality signatures. Its report is built offline and opened from a ``file://`` URL in Debian's
chromium, driven by Playwright (never a browser Playwright downloads), in a window whose content
frame is about 900 px wide beside the menu. The tests check that the first page shows Table 2's
numbers without a click or a scroll (the rule graph below), that one click opens each result, what
the browser shows (a model name and a number in each table, a figure image with a non-zero size),
that no page is wider than its frame, that a Table 2 cell is two lines at most, and that the
comparisons page's interval and p-value columns are in view.

Without chromium or Playwright the tests are skipped, saying which is missing, unless
``VERBEVAL_REQUIRE_BROWSER=1`` (CI, ``.ci/run``): then they fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO_ROOT
from verbeval.core.config import load_schema

pytestmark = pytest.mark.e2e

SNAKEFILE = REPO_ROOT / "Snakefile"
MODEL = "tiny-bert"
PSEUDO = "ross-pavlick-2019-bert"
#: Debian's chromium (apt-get install chromium), as .ci/run installs it
CHROMIUM = Path("/usr/bin/chromium")
#: what the browser is started with: headless, no sandbox (CI runs as root), nothing fetched from the network
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: a number with decimals, as the tables write them
NUMBER = re.compile(r"-?\d+\.\d+")
#: the second model (a tiny GPT-2, random too): two models make the comparisons page
OTHER = "tiny-gpt2"
#: the browser window: the content frame a result opens in is about 900 px wide beside the menu
VIEWPORT = {"width": 1130, "height": 800}
#: Table 2 on the first page, and the frame a result opens in
TABLE2_FRAME = 'iframe[title="Table 2"]'
RESULT_FRAME = "iframe.h-screen"
#: per element, the lines its text is laid out on (the distinct tops of its text's boxes)
LINES = """cs => cs.map(c => {
    const tops = new Set(), walk = document.createTreeWalker(c, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const r = document.createRange(); r.selectNodeContents(n);
        for (const b of r.getClientRects()) tops.add(Math.round(b.top));
    }
    return tops.size;
})"""


def _missing_browser() -> str | None:
    """Why the browser tests cannot run here, None when they can."""
    try:
        import playwright.sync_api  # noqa: F401  (the test extra: pip install -e ".[test]")
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)"
    return None


@pytest.fixture(scope="module")
def browser_ready() -> None:
    why = _missing_browser()
    if why is None:
        return
    if os.environ.get("VERBEVAL_REQUIRE_BROWSER") == "1":
        pytest.fail(f"VERBEVAL_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


def _absolute_resources(cfg: dict[str, Any]) -> None:
    """Every setting whose default is a repository-relative file, as a path into the repository."""
    schema = load_schema()
    for props, section in ((schema["properties"], cfg), (schema["properties"]["agreement"]["properties"], None)):
        target = section if section is not None else cfg.setdefault("agreement", {})
        for key, sub in props.items():
            default = sub.get("default")
            if isinstance(default, str) and (REPO_ROOT / default).exists():
                target.setdefault(key, str(REPO_ROOT / default))


def _snakemake(root: Path, config: Path, *args: str) -> None:
    env = dict(os.environ, TQDM_DISABLE="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the `verbeval` CLI
    cmd = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(root)]
    proc = subprocess.run(
        [*cmd, "--configfile", str(config), "--cores", "2", *args], cwd=root, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


@pytest.fixture(scope="module")
def report(browser_ready: None, data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report (HTML) of a small finished run, restricted to what its landing page links to."""
    root = tmp_path_factory.mktemp("report-run")
    res = root / "results"
    cfg: dict[str, Any] = {
        "results_dir": str(res),
        "raw_dir": str(root / "data" / "raw"),
        "data_mirror": str(data_dir),
        "tiny_models": [
            {"out": str(root / "models" / "bert"), "arch": "bert"},
            {"out": str(root / "models" / "gpt2"), "arch": "gpt2"},
        ],
        "models": [
            {"id": str(root / "models" / "bert"), "name": MODEL},
            {"id": str(root / "models" / "gpt2"), "name": OTHER},
        ],
        "inference": {"threads": 1},
        "agreement": {
            "groups": ["simple"],
            "max_rows_per_source": 6,
            "chunks": 1,
            "verb_lists": ["verbs_combined"],
            "bootstrap": {"resamples": 20},
            "figures": {"formats": ["png"]},
        },
        "simverb": {"bootstrap": {"resamples": 20}, "formats": ["png"]},
        "veridicality": {"models": [PSEUDO], "formats": ["png"]},
    }
    _absolute_resources(cfg)
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    targets = [
        f"{res}/agreement/table2.html",
        f"{res}/agreement/comparisons.html",
        f"{res}/agreement/figures/fig1_top_p.png",
        f"{res}/simverb/{MODEL}/simverb_{MODEL}.html",
        f"{res}/veridicality/{PSEUDO}/signatures_{PSEUDO}.html",
    ]
    _snakemake(root, config, *targets)
    out = root / "report.html"
    _snakemake(root, config, *targets, "--report", str(out))
    return out


@pytest.fixture(scope="module")
def page(report: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The report opened in headless chromium (a new, empty profile) from its file:// URL, in a window
    of :data:`VIEWPORT` (its content frame about 900 px wide beside the menu)."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, viewport=VIEWPORT
        )
        try:
            yield context.new_page()
        finally:
            context.close()


def expect(locator: Any) -> Any:
    """Playwright's ``expect`` (it waits until the assertion holds, 5 s at most)."""
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator)


def _open(page: Any, report: Path, link: str) -> None:
    """On the landing page, click ``link``: one click opens its result in the content frame."""
    page.goto(report.as_uri())
    page.get_by_role("link", name=link, exact=True).click()


def _table_text(page: Any, heading: str, frame: str = "iframe") -> str:
    """The text of the table in the report's content frame, once the page headed ``heading`` shows."""
    content = page.frame_locator(frame)
    content.get_by_role("heading", name=heading).wait_for(timeout=30_000)
    table = content.locator("table").first
    expect(table).to_be_visible()
    return table.inner_text()


def _overflow(page: Any, frame: str | None = None) -> tuple[int, int]:
    """The (scrollWidth, clientWidth) of the document of ``frame`` (an iframe's selector), or of the
    report's content pane: wider content than client means a horizontal scroll bar."""
    if frame is None:
        return tuple(
            page.locator("div.grow.h-screen.overflow-auto").first.evaluate("e => [e.scrollWidth, e.clientWidth]")
        )
    body = page.frame_locator(frame).locator("html")
    return tuple(body.evaluate("e => [e.scrollWidth, e.clientWidth]"))


def _in_view(page: Any, box: dict[str, float], frame: dict[str, float] | None = None) -> bool:
    """Whether ``box`` (a bounding box in the window) lies in the window without scrolling (and in
    ``frame``'s box, when given)."""
    right, bottom = box["x"] + box["width"], box["y"] + box["height"]
    ok = box["x"] >= 0 and box["y"] >= 0 and right <= VIEWPORT["width"] and bottom <= VIEWPORT["height"]
    if frame is not None:
        ok = ok and right <= frame["x"] + frame["width"] + 0.5 and bottom <= frame["y"] + frame["height"] + 0.5
    return ok


def test_the_report_opens_on_table2(page: Any, report: Path) -> None:
    """The first page shows Table 2's numbers without a click or a scroll, the figures and the
    comparisons one click away above it, the rule graph below it; nothing is wider than the window."""
    page.goto(report.as_uri())
    text = _table_text(page, "Table 2", TABLE2_FRAME)
    assert MODEL in text and OTHER in text and "Simple" in text, text[:500]
    frame = page.locator(TABLE2_FRAME).bounding_box()
    assert frame is not None and _in_view(page, {**frame, "height": 1}), frame  # its top, on the first screen
    # the first group's row, TSE's value of the first model: in the window and in the frame
    first = page.frame_locator(TABLE2_FRAME).locator("table tr").nth(2).locator("td").nth(1)  # 2 header rows
    assert NUMBER.fullmatch(first.inner_text().splitlines()[0]), first.inner_text()
    assert _in_view(page, first.bounding_box(), frame), (first.bounding_box(), frame)
    for link in (
        "Figure 1: EW and MW against top-p cutoff",
        "Paired comparisons",
        f"SimVerb-3500: rho by layer, {MODEL}",
        f"Veridicality signatures, {PSEUDO}",
    ):
        expect(page.get_by_role("link", name=link, exact=True)).to_be_visible()
        assert _in_view(page, page.get_by_role("link", name=link, exact=True).bounding_box()), link
    # the rule graph is on the page, under Table 2 (vega draws it in #rulegraph)
    graph = page.locator("#rulegraph svg, #rulegraph canvas").first
    graph.wait_for(timeout=30_000)
    assert graph.bounding_box()["y"] >= frame["y"] + frame["height"]
    scroll, client = _overflow(page)
    assert scroll <= client, (scroll, client)
    scroll, client = _overflow(page, TABLE2_FRAME)
    assert scroll <= client, (scroll, client)


def test_table2_is_visible(page: Any, report: Path) -> None:
    _open(page, report, "Table 2")
    text = _table_text(page, "Table 2", RESULT_FRAME)
    assert MODEL in text and "Simple" in text, text[:500]
    assert NUMBER.search(text), text[:500]
    # every value cell is two lines at most: the value, its CI (TSE's Wilson interval: the tooltip)
    cells = page.frame_locator(RESULT_FRAME).locator("td.num")
    lines = cells.evaluate_all(LINES)
    assert len(lines) >= 8 and max(lines) == 2 and min(lines) >= 1, lines
    scroll, client = _overflow(page, RESULT_FRAME)
    assert scroll <= client, (scroll, client)


def test_the_comparisons_page_fits_its_frame(page: Any, report: Path) -> None:
    """One click from the first page; the numbers, its interval and p-value columns included, in the
    frame and the window without scrolling; the random models named above them."""
    _open(page, report, "Paired comparisons")
    text = _table_text(page, "Paired comparisons", RESULT_FRAME)
    assert "simple" in text and "tse" in text and NUMBER.search(text), text[:500]
    content = page.frame_locator(RESULT_FRAME)
    expect(content.get_by_text("randomly initialised, so the numbers are meaningless:")).to_be_visible()
    frame = page.locator(RESULT_FRAME).bounding_box()
    assert 850 <= frame["width"] <= 950, frame  # the frame of the issue: about 900 px
    for head in ("B - A", "interval", "p", "p adj.", "mdd", "significant"):
        th = content.locator(
            "thead th",
            has_text=re.compile(rf"^{re.escape(head)}$|% interval$" if head == "interval" else rf"^{re.escape(head)}$"),
        ).first
        assert _in_view(page, th.bounding_box(), frame), (head, th.bounding_box(), frame)
    # TSE's p-value of the first group, in the one format: scientific below 0.001, else 3 decimals
    row = content.locator("tbody tr", has=content.locator("td", has_text=re.compile("^tse$"))).first
    p = row.locator("td").nth(6).inner_text()
    assert re.fullmatch(r"\d\.\d\de-\d\d|[01]\.\d{3}|–", p), p
    assert _in_view(page, row.locator("td").nth(6).bounding_box(), frame)
    scroll, client = _overflow(page, RESULT_FRAME)
    assert scroll <= client, (scroll, client)


def test_simverb_table_is_visible(page: Any, report: Path) -> None:
    _open(page, report, f"SimVerb-3500: rho by layer, {MODEL}")
    text = _table_text(page, f"SimVerb-3500: Spearman rho per representation and subset ({MODEL})", RESULT_FRAME)
    assert MODEL in text and "layer0" in text and "rho" in text, text[:500]
    assert NUMBER.search(text), text[:500]
    # the model is random: the page says so above the table
    frame = page.frame_locator(RESULT_FRAME)
    expect(frame.get_by_text(f"meaningless: {MODEL}")).to_be_visible()
    scroll, client = _overflow(page, RESULT_FRAME)
    assert scroll <= client, (scroll, client)


def test_signatures_table_is_visible(page: Any, report: Path) -> None:
    _open(page, report, f"Veridicality signatures, {PSEUDO}")
    text = _table_text(page, f"Verb veridicality per signature, Ross & Pavlick 2019 ({PSEUDO})", RESULT_FRAME)
    assert "+/+" in text and "positive" in text, text[:500]
    assert NUMBER.search(text), text[:500]
    scroll, client = _overflow(page, RESULT_FRAME)
    assert scroll <= client, (scroll, client)


def test_figure_is_rendered(page: Any, report: Path) -> None:
    _open(page, report, "Figure 1: EW and MW against top-p cutoff")
    img = page.locator("img[src^='data:image/png']").last
    img.wait_for(timeout=30_000)
    expect(img).to_be_visible()
    size = img.evaluate("i => i.complete ? [i.naturalWidth, i.naturalHeight] : [0, 0]")
    assert size[0] > 0 and size[1] > 0, size
