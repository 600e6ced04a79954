"""The hub's pages in real headless Chromium (Debian's, driven by Playwright): they render without
console errors and show the ranked, verified entries; screenshots are saved in tests/artifacts/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts"


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def open_page(browser, url):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    response = page.goto(url)
    assert response is not None and response.status == 200
    return page, errors


def test_the_leaderboard_page_in_chromium(browser, hub, accepted):
    page, errors = open_page(browser, hub.url + "/packs/core")
    rows = page.locator("table tr")
    assert rows.count() == 4  # header + the three accepted entries (refused ones never appear)
    cells = [rows.nth(i).locator("td").all_inner_texts() for i in range(1, 4)]
    assert [c[0] for c in cells] == ["1 (tied)", "1 (tied)", "3"]
    assert {c[3] for c in cells} == {"oracle A", "oracle B", "noop"}
    assert "85.1% – 100.0%" in page.inner_text("body")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "leaderboard.png"), full_page=True)
    assert errors == []
    page.close()


def test_the_index_links_to_the_board(browser, hub, accepted):
    page, errors = open_page(browser, hub.url + "/")
    page.click("text=core")
    page.wait_for_url("**/packs/core")
    assert "core leaderboard" in page.inner_text("h1")
    page.screenshot(path=str(ARTIFACTS / "index-to-board.png"))
    assert errors == []
    page.close()
