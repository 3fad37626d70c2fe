"""The Snakemake report of a finished run, opened in a real headless browser and clicked through.

A small run (one tiny randomly initialised BERT on a word-level tokenizer of the data, the ``simple``
group, 6 rows per template file, SimVerb-3500 and the released veridicality probabilities) is built
for just the results the report's landing page leads to (Figure 2 aside, to save a job): Table 2,
Figure 1, SimVerb-3500's rho by layer and the veridicality signatures. Its report is built offline and opened from a ``file://`` URL
in Debian's chromium, driven by Playwright (never a browser Playwright downloads). The test clicks
from the landing page to Table 2, a SimVerb-3500 table, the signatures and Figure 1, and checks what
the browser shows: a model name and a number in each table, a figure image with a non-zero size.

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
        "tiny_models": [{"out": str(root / "models" / "bert"), "arch": "bert"}],
        "models": [{"id": str(root / "models" / "bert"), "name": MODEL}],
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
    """The report opened in headless chromium (a new, empty profile) from its file:// URL."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
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
    """On the landing page, click ``link``, then the eye button of the result it selects in the menu."""
    page.goto(report.as_uri())
    page.get_by_role("link", name=link).click()
    eye = page.locator("nav span.flex a[type=button]").first
    eye.wait_for(timeout=30_000)
    eye.click()


def _table_text(page: Any, heading: str) -> str:
    """The text of the table in the report's content frame, once the page headed ``heading`` shows."""
    frame = page.frame_locator("iframe")
    frame.get_by_role("heading", name=heading).wait_for(timeout=30_000)
    table = frame.locator("table").first
    expect(table).to_be_visible()
    return table.inner_text()


def test_landing_page_leads_to_the_results(page: Any, report: Path) -> None:
    page.goto(report.as_uri())
    for link in (
        "Table 2: TSE, EW and MW per template group and model",
        "Figure 1: EW and MW against top-p cutoff",
        f"SimVerb-3500: Spearman rho by layer, {MODEL}",
        f"Veridicality signatures, {PSEUDO}",
    ):
        expect(page.get_by_role("link", name=link)).to_be_visible()
    # the rule graph is on the same page (vega draws it in #rulegraph)
    page.locator("#rulegraph svg, #rulegraph canvas").first.wait_for(timeout=30_000)


def test_table2_is_visible(page: Any, report: Path) -> None:
    _open(page, report, "Table 2: TSE, EW and MW per template group and model")
    text = _table_text(page, "Table 2")
    assert MODEL in text and "Simple" in text, text[:500]
    assert NUMBER.search(text), text[:500]


def test_simverb_table_is_visible(page: Any, report: Path) -> None:
    _open(page, report, f"SimVerb-3500: Spearman rho by layer, {MODEL}")
    text = _table_text(page, f"SimVerb-3500: Spearman rho per representation and subset ({MODEL})")
    assert MODEL in text and "layer0" in text and "rho" in text, text[:500]
    assert NUMBER.search(text), text[:500]
    # the model is random: the page says so above the table
    frame = page.frame_locator("iframe")
    expect(frame.get_by_text(f"meaningless: {MODEL}")).to_be_visible()


def test_signatures_table_is_visible(page: Any, report: Path) -> None:
    _open(page, report, f"Veridicality signatures, {PSEUDO}")
    text = _table_text(page, f"Verb veridicality per signature, Ross & Pavlick 2019 ({PSEUDO})")
    assert "+/+" in text and "positive" in text, text[:500]
    assert NUMBER.search(text), text[:500]


def test_figure_is_rendered(page: Any, report: Path) -> None:
    _open(page, report, "Figure 1: EW and MW against top-p cutoff")
    img = page.locator("img[src^='data:image/png']").last
    img.wait_for(timeout=30_000)
    expect(img).to_be_visible()
    size = img.evaluate("i => i.complete ? [i.naturalWidth, i.naturalHeight] : [0, 0]")
    assert size[0] > 0 and size[1] > 0, size
