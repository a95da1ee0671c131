"""The documentation site: ``mkdocs build --strict`` passes (and fails on a broken link or a
public module without its reference page), and every page renders in headless Chromium with
no missing asset, a search that answers, and a navigation that reaches every page."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag

import pytest

from docgen.blocks import ROOT

CHROMIUM_FLAGS = [  # a closed network: no background connections, no first-run work
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _build(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        capture_output=True, text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = _build(ROOT / "mkdocs.yml", out)
    assert built.returncode == 0, built.stderr[-5000:]
    return out


def _pages(site: Path) -> set[str]:
    return {str(p.parent.relative_to(site)).removeprefix(".") for p in site.rglob("index.html")}


def test_the_site_builds_strictly_with_every_page_searchable(site: Path) -> None:
    pages = _pages(site)
    assert {"", "getting-started/first-run", "algorithms/ppo", "reference/flow", "cli", "benchmarks"} <= pages
    index = json.loads((site / "search" / "search_index.json").read_text())
    indexed = {doc["location"].split("#")[0].rstrip("/") for doc in index["docs"]}
    assert pages - indexed == set()
    ppo = (site / "algorithms" / "ppo" / "index.html").read_text()
    assert "learner.lr" in ppo and "parallel_rollouts" in ppo  # its config fields and its plan, generated


def test_a_broken_link_or_a_missing_reference_page_fails_the_strict_build(tmp_path: Path) -> None:
    for name in ("asyncflow", "docgen", "benchmarks"):
        (tmp_path / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "docs" / "reference" / "plot.md").unlink()
    page = tmp_path / "docs" / "guides" / "actors.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    config = (ROOT / "mkdocs.yml").read_text().replace("      - asyncflow.plot: reference/plot.md\n", "")
    (tmp_path / "mkdocs.yml").write_text(config)
    built = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "no-such-page.md" in built.stderr
    assert "public module asyncflow.plot has no reference page" in built.stderr


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.timeout(300)
def test_every_page_renders_in_chromium(site: Path, served: str) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium; .ci/run installs it)")
    problems: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page()
        page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status}: {r.url}"))
        page.on("request", lambda r: r.url.startswith(("http", "ws")) and not r.url.startswith(served)
                and problems.append(f"outside the site: {r.url}"))  # fmt: skip
        page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
        page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
        seen: set[str] = set()
        queue = [served]
        while queue:
            url = queue.pop()
            if url in seen:
                continue
            seen.add(url)
            page.goto(url, wait_until="load")
            assert page.locator("article h1").count() >= 1, f"{url}: no title rendered"
            links = page.eval_on_selector_all("nav.md-nav--primary a.md-nav__link[href]", "els => els.map(e => e.href)")
            for href in links:
                target = urldefrag(href).url
                if target.startswith(served) and target not in seen:
                    queue.append(target)
        page.goto(served, wait_until="load")
        search = page.locator("input.md-search__input")
        search.click()
        search.press_sequentially("replay buffer", delay=20)  # keystrokes: the search listens to them
        page.wait_for_selector(".md-search-result__item", timeout=20_000)
        results = page.locator(".md-search-result__item").count()
        browser.close()
    reached = {url.removeprefix(served).rstrip("/") for url in seen}
    assert _pages(site) - reached == set(), "pages the navigation does not reach"
    assert problems == []
    assert results > 0
