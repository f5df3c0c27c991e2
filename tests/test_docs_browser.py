"""The documentation site as its readers see it: the site is built (``mkdocs build --strict``), served on localhost,
and every page is opened in headless Chromium (Debian's ``chromium`` package, driven by Playwright) with the
network closed to everything but localhost, so the site must carry all it needs (KaTeX, fonts). A page fails on:

- a console error or a failed request (a CDN, a web font, a script that throws);
- an image that does not load;
- raw TeX left after typesetting;
- struck-through text (no page means it: a docstring's ``<s>`` read as an HTML tag strikes the rest through);
- a list rendered as a paragraph (a docstring list with no blank line before it);
- a picture without a caption, or a caption that does not quote the title its PNG records;
- a displayed equation wider than the text column on a desktop, or outside it on a phone; a page that scrolls
  sideways;
- code broken across lines in a table, an API signature smaller than the body text;
- a link to a page or anchor of the site that is not there.

Skipped where Chromium or Playwright is missing, unless ``CI`` is set (.ci/run installs Chromium: ``apt-get install
-y chromium``; Playwright is in the docs extra), where a missing one fails. With ``DOCS_SCREENSHOTS=DIR`` it also
writes screenshots of four pages into DIR (docs/images/screenshots/ holds the committed ones: docs/run-notes.md)."""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest

REPO = Path(__file__).resolve().parents[1]
# docs/TRANSFORMERS-V5-NOTES.md, "A real browser for the docs": without the background-networking flags Chromium
# keeps trying hosts it cannot reach
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}
SCREENSHOTS = {  # file name → page, for DOCS_SCREENSHOTS
    "home.png": "",
    "family-transformer.png": "families/transformer/",
    "api-shared-modules.png": "api/shared/",
    "benchmarks.png": "benchmarks/",
}
# pages written by the benchmarks and replications themselves (the hook docs/hooks/result_pages.py puts them into
# the site): their plots are described by the tables around them, not by figure captions
RESULT_PAGES = ("benchmarks/results/", "replications/results/")

# Runs in the page once it has loaded (docs/javascripts/math.js typesets as the page loads): what the reader sees.
INSPECT_PAGE = r"""
async (onPhone) => {
  await document.fonts.ready;
  const article = document.querySelector("article.md-content__inner") || document.body;
  const column = article.getBoundingClientRect();
  const snippet = (node) => (node.textContent || "").replace(/\s+/g, " ").trim().slice(0, 90);
  const outside = (node) => node.closest("pre, code, script, style, .katex, .md-clipboard");

  const brokenImages = [...document.images]
    .filter((image) => !(image.complete && image.naturalWidth > 0))
    .map((image) => image.getAttribute("src"));

  // raw TeX: formulas KaTeX did not replace, or a TeX command left in the text a reader sees
  const formulas = [...article.querySelectorAll(".arithmatex")];
  const untypeset = formulas.filter((math) => !math.querySelector(".katex"));
  const rawTex = untypeset.length
    ? [`${untypeset.length} of ${formulas.length} formulas left as TeX, the first: "${snippet(untypeset[0])}"`]
    : [];
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    if (!outside(text.parentElement) && !text.parentElement.closest(".arithmatex") &&
        /\\(?:[a-zA-Z]{2,}|[\[\]()])/.test(text.textContent)) {
      rawTex.push(`TeX in the text: "${text.textContent.replace(/\s+/g, " ").trim().slice(0, 90)}"`);
    }
  }

  // struck-through text: an <s>/<del>/<strike> element or a line-through style (no page means one)
  const struck = [...article.querySelectorAll("*")].filter(
    (node) =>
      ["S", "DEL", "STRIKE"].includes(node.tagName) ||
      getComputedStyle(node).textDecorationLine.includes("line-through"),
  );
  const paragraphs = [...article.querySelectorAll("p")];
  const struckParagraphs = paragraphs.filter((p) => struck.some((node) => node.contains(p) || p.contains(node)));
  const strikethrough = struck.length
    ? [`${struck.length} struck-through element(s) (<${struck[0].tagName.toLowerCase()}>) covering ` +
       `${struckParagraphs.length} of ${paragraphs.length} paragraphs, the first: "${snippet(struck[0])}"`]
    : [];

  // a Markdown list written without its blank line: a paragraph with lines that start with a list marker
  const listsAsParagraphs = paragraphs
    .filter((p) => !outside(p) && /(^|\n)[ \t]*(?:[-*+]|\d{1,2}[.)])[ \t]+\S/.test(p.textContent))
    .map(snippet);

  // figures: each image of a page the docs write sits in a <figure> with a caption
  const uncaptioned = [...article.querySelectorAll("img")]
    .filter((image) => !image.closest("figure")?.querySelector("figcaption")?.textContent.trim())
    .map((image) => image.getAttribute("src"));
  const captions = [...article.querySelectorAll("figure")]
    .filter((figure) => figure.querySelector("img"))
    .map((figure) => ({
      src: figure.querySelector("img").src,
      caption: figure.querySelector("figcaption")?.textContent.replace(/\s+/g, " ").trim() || "",
    }));

  // wide content: the page never scrolls sideways; a displayed equation fits the text column on a desktop, and on
  // a phone shows inside the column (with the margins Material gives equations and code there) or scrolls in its box
  const overflow = [];
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    overflow.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${window.innerWidth} px window`);
  }
  const margins = getComputedStyle(article);
  const columnLeft = column.left - parseFloat(margins.marginLeft);
  const columnRight = column.right + parseFloat(margins.marginRight);
  for (const math of article.querySelectorAll(".katex-display")) {
    let { left, right } = math.getBoundingClientRect();
    const width = right - left;
    for (let box = math; box && box !== article; box = box.parentElement) {
      const clipping = getComputedStyle(box).overflowX;
      if (clipping === "visible") continue;
      const clip = box.getBoundingClientRect();
      if (["hidden", "clip"].includes(clipping) && box.scrollWidth > box.clientWidth + 1) {
        overflow.push(`equation cut off (overflow-x: ${clipping}): "${snippet(math)}"`);
      }
      left = Math.max(left, clip.left);
      right = Math.min(right, clip.right);
    }
    const box = math.closest("div.arithmatex") || math;
    if (!onPhone && box.scrollWidth > box.clientWidth + 1) {  // on a desktop, a reader should not have to scroll
      overflow.push(`equation ${box.scrollWidth} px wide in a ${box.clientWidth} px column: "${snippet(math)}"`);
    }
    if (right > columnRight + 1 || left < columnLeft - 1) {
      overflow.push(`equation ${Math.round(left)}–${Math.round(right)} px (${Math.round(width)} px wide) outside ` +
                    `the column ${Math.round(columnLeft)}–${Math.round(columnRight)} px: "${snippet(math)}"`);
    }
  }

  // layout: code in a table cell kept on one line (`scratch-transformer`, not "scratch-trans / former"), and an API
  // signature no smaller than the body text
  const layout = [...article.querySelectorAll("td code, th code")]
    .filter((code) => code.getClientRects().length > 1)
    .map((code) => `code broken across lines in a table: "${snippet(code)}"`);
  const body = parseFloat(getComputedStyle(article).fontSize);
  for (const signature of article.querySelectorAll(".doc-heading code")) {
    const size = parseFloat(getComputedStyle(signature).fontSize);
    if (size < body - 0.01) {
      layout.push(`API signature in ${size} px, the body text in ${body} px: "${snippet(signature)}"`);
      break;
    }
  }

  return {
    layout,
    brokenImages, rawTex, strikethrough, listsAsParagraphs, uncaptioned, captions, overflow,
    hasMath: article.querySelector(".arithmatex") !== null,
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    ids: [...document.querySelectorAll("[id]")].map((node) => node.id),
  };
}
"""


@dataclass
class Page:
    """What one page showed: its problems by kind, its links and its anchors."""

    path: str
    problems: dict[str, list[str]] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    captions: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Site:
    root: Path  # the built site
    url: str  # where it is served, ending in /
    pages: dict[str, Page]  # path below the root ("" for the home page) → what it showed
    seconds: float  # the browser's pass over every page


def required(what: str, why: str) -> None:
    """Skip for lack of ``what`` on a developer's machine; fail with ``CI`` set, where the README's block installs
    it."""
    message = f"{what} is missing: {why}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: .ci/run installs it)")
    pytest.skip(message)


def page_paths(root: Path) -> list[str]:
    """Every page of the built site, as the path below its root: each folder's index.html, and 404.html."""
    found = [
        "" if index.parent == root else index.parent.relative_to(root).as_posix() + "/"
        for index in root.rglob("index.html")
    ]
    return sorted(found) + ["404.html"]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


def browse(root: Path, url: str, screenshots: Path | None) -> dict[str, Page]:
    from playwright.sync_api import sync_playwright

    host = urlparse(url).hostname
    with sync_playwright() as playwright, tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=shutil.which("chromium"), headless=True, args=CHROMIUM_FLAGS, viewport=DESKTOP
        )
        # the network is closed to everything but the local server: a CDN or a web font fails the page
        context.route("**/*", lambda route: route.continue_() if _host(route.request.url) == host else route.abort())
        # the home page first, until the network is quiet: the search index and what loads late on every page
        paths = page_paths(root)
        pages = {path: visit(context, url, path, screenshots, settle=index == 0) for index, path in enumerate(paths)}
        context.close()
    return pages


def visit(context, url: str, path: str, screenshots: Path | None, settle: bool = False) -> Page:
    """Open one page and record what went wrong on it; a page with math is measured again at a phone's width."""
    tab = context.new_page()
    errors, failed = [], []
    tab.on("console", lambda message: errors.append(_console(message)) if message.type == "error" else None)
    tab.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    tab.on("requestfailed", lambda request: failed.append(f"{request.url} ({request.failure})"))
    tab.on(
        "response",
        lambda response: failed.append(f"{response.url} (HTTP {response.status})") if response.status >= 400 else None,
    )
    tab.goto(url + path, wait_until="networkidle" if settle else "load")
    seen = tab.evaluate(INSPECT_PAGE, False)
    overflow = seen["overflow"]
    if screenshots is not None and path in SCREENSHOTS.values():
        screenshots.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(screenshots / next(name for name, page in SCREENSHOTS.items() if page == path)))
    if seen["hasMath"]:  # a phone's narrow column: the equations again
        tab.set_viewport_size(PHONE)
        overflow += [f"at {PHONE['width']} px: {problem}" for problem in tab.evaluate(INSPECT_PAGE, True)["overflow"]]
    tab.close()
    problems = {
        "console errors": errors,
        "failed requests": failed,
        "broken images": seen["brokenImages"],
        "raw TeX": seen["rawTex"],
        "strikethrough": seen["strikethrough"],
        "lists as paragraphs": seen["listsAsParagraphs"],
        "uncaptioned images": [] if path.startswith(RESULT_PAGES) else seen["uncaptioned"],
        "overflow": overflow,
        "layout": seen["layout"],
    }
    found = {kind: shown for kind, shown in problems.items() if shown}
    return Page(path, found, links=seen["links"], ids=set(seen["ids"]), captions=seen["captions"])


def _console(message) -> str:
    source = message.location.get("url", "")
    return f"{message.text} ({source})" if source else message.text


def _host(url: str) -> str | None:
    return urlparse(url).hostname


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Site:
    if shutil.which("chromium") is None:
        required("Chromium", "install Debian's package, `apt-get install -y chromium` (never `playwright install`)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        required("playwright", "pip install -e '.[docs]'")
    root = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-4000:]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    screenshots = os.environ.get("DOCS_SCREENSHOTS")
    started = time.perf_counter()
    try:
        pages = browse(root, url, Path(screenshots).resolve() if screenshots else None)
    finally:
        server.shutdown()
    seconds = time.perf_counter() - started
    print(f"\nthe browser opened {len(pages)} pages in {seconds:.1f} s")
    return Site(root, url, pages, seconds)


def problems_of(site: Site, kind: str) -> str:
    """The problems of one kind, each once with the pages that show it."""
    where: dict[str, list[str]] = {}
    for path, page in site.pages.items():
        for problem in dict.fromkeys(page.problems.get(kind, [])):
            where.setdefault(problem, []).append(path or "(home)")
    lines = [
        f"{problem}  [{len(paths)} page(s): {', '.join(paths[:4])}{', …' if len(paths) > 4 else ''}]"
        for problem, paths in where.items()
    ]
    return "\n".join(lines[:30] + ([f"… and {len(lines) - 30} more"] if len(lines) > 30 else []))


def test_every_page_was_opened(site):
    assert len(site.pages) > 15 and "api/shared/" in site.pages and "benchmarks/" in site.pages


@pytest.mark.parametrize(
    "kind",
    [
        "console errors",
        "failed requests",
        "broken images",
        "raw TeX",
        "strikethrough",
        "lists as paragraphs",
        "uncaptioned images",
        "overflow",
        "layout",
    ],
)
def test_no_page_shows(site, kind):
    found = problems_of(site, kind)
    assert not found, f"{kind}:\n{found}"


def test_internal_links_resolve(site):
    """Every link to the site itself (navigation, text, API cross-references) reaches a page or file that is
    there, and its #anchor exists on that page."""
    broken, checked = set(), 0
    for path, page in site.pages.items():
        for link in page.links:
            if not link.startswith(site.url):
                continue  # another site: the reader's browser follows it, this offline one cannot
            target, anchor = urldefrag(link)
            below = target[len(site.url) :]
            checked += 1
            if below in site.pages:
                if anchor and anchor not in site.pages[below].ids:
                    broken.add(f"{path or '(home)'} → {below or '(home)'}#{anchor} (no such anchor)")
            elif not (site.root / below).is_file():
                broken.add(f"{path or '(home)'} → {below} (no such page or file)")
    assert checked > 500
    assert not broken, "\n".join(sorted(broken))


def test_sitemap_lists_every_page(site):
    """sitemap.xml (written from site_url) names every page, so a search engine finds them."""
    tree = ElementTree.parse(site.root / "sitemap.xml")
    listed = {urlparse(loc.text or "").path for loc in tree.iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")}
    base = urlparse(_site_url()).path
    pages = {base + path for path in site.pages if path != "404.html"}
    assert pages <= listed, f"sitemap.xml lacks {sorted(pages - listed)[:5]} (set site_url in mkdocs.yml)"


def test_captions_name_what_the_figures_record(site):
    """A figure whose PNG records a title (hf_scratch.tools.viz writes the figure's own title into the file's
    metadata) is captioned with that title, so that a picture and its caption cannot say different things."""
    from PIL import Image

    mismatched = []
    for path, page in site.pages.items():
        for figure in page.captions:
            source = urlparse(figure["src"]).path[len(urlparse(site.url).path) :]
            with Image.open(site.root / source) as image:
                title = image.info.get("Title")
            if title and title not in figure["caption"]:
                mismatched.append(f'{path}: {source} records "{title}"; its caption: "{figure["caption"]}"')
    assert not mismatched, "\n".join(mismatched)


def _site_url() -> str:
    """mkdocs.yml's site_url: SITE_URL when set, else the default it names."""
    if os.environ.get("SITE_URL"):
        return os.environ["SITE_URL"]
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    found = re.search(r"^site_url:\s*(?:!ENV\s*\[\s*\w+\s*,\s*)?[\"']?([^\"'\]\s]+)", text, re.M)
    return found.group(1) if found else ""
