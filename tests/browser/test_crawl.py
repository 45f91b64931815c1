"""Crawl every page of the demo as an annotator, an engineer and an admin: every same-origin link and every
`hx-get` is followed (each URL shape twice at most), and none answers with an error status or logs a
console error (a missing favicon, a script refused by the CSP, a failed fragment would), every whole
page has one `<h1>`, and no page shows markup as text (`<a href=…>` or `<code>` escaped into the page's
words, issue 36: a translated sentence's link or code built as text and escaped)."""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from demo_server import demo_site, login

PER_SHAPE = 2
MAX_PAGES = 120
# Not pages: logging out ends the crawl, downloads are fetched without the page (below).
SKIP = re.compile(r"^/(logout|static/)")
DOWNLOAD = re.compile(r"/report\.(md|csv)$|/export")

LINKS = """[...document.querySelectorAll('a[href], [hx-get]')].map((el) => el.getAttribute('hx-get') || el.getAttribute('href'))"""
# The page's words (edit boxes, scripts and styles left out: an edit box may hold a template's own markup).
WORDS = """(() => { const copy = document.body.cloneNode(true);
  copy.querySelectorAll('textarea, script, style, input').forEach((el) => el.remove());
  return copy.textContent; })()"""
# Markup a reader should never see as text: a tag of the product's sentences, or an entity escaped twice.
ESCAPED = re.compile(r"<(?:a|code|em|strong|span|br|b|i)(?:\s[^<>]*)?>|</(?:a|code|em|strong)>|&(?:lt|gt|amp|quot);")


def escaped_markup(text: str) -> list[str]:
    """Return the markup shown as text in a page's words (at most three pieces)."""
    return [match.group(0) for match in ESCAPED.finditer(text)][:3]


@pytest.fixture(scope="module")
def site(tmp_path_factory, demo_template):
    with demo_site(tmp_path_factory, demo_template) as served:
        yield served


def _shape(url: str) -> str:
    parts = urlsplit(url)
    keys = sorted(k.split("=")[0] for k in parts.query.split("&") if k)
    return re.sub(r"demo-\d+|\d+", "N", parts.path) + "?" + "&".join(keys)


@pytest.mark.parametrize("username", ["dra.garcia", "engineer", "admin"])
def test_every_page_answers_without_an_error(browser, site, username):
    context = browser.new_context()
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text} on {page.url}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(f"script error: {exc} on {page.url}"))
    try:
        login(page, site.url, username)
        origin = urlsplit(site.url).netloc
        queue, seen, shapes, visited = deque([page.url, f"{site.url}/datasets", f"{site.url}/account"]), set(), {}, 0
        while queue and visited < MAX_PAGES:
            url = urldefrag(queue.popleft())[0]
            parts = urlsplit(url)
            if url in seen or parts.netloc != origin or SKIP.match(parts.path):
                continue
            seen.add(url)
            shape = _shape(url)
            if shapes.get(shape, 0) >= PER_SHAPE:
                continue
            shapes[shape] = shapes.get(shape, 0) + 1
            visited += 1
            if DOWNLOAD.search(parts.path):
                response = context.request.get(url)
                if response.status >= 400:
                    problems.append(f"{response.status} {url}")
                continue
            response = page.goto(url)
            if response is None or response.status >= 400:
                problems.append(f"{response.status if response else 'no response'} {url}")
                continue
            # every whole page (not an htmx fragment) says what it is in one heading
            if page.evaluate("!!document.querySelector('header.topbar')") and page.locator("h1").count() != 1:
                problems.append(f"{page.locator('h1').count()} <h1> on {url}")
            shown = escaped_markup(page.evaluate(WORDS))
            if shown:
                problems.append(f"markup shown as text on {url}: {shown}")
            for href in page.evaluate(LINKS):
                if href and not href.startswith(("mailto:", "javascript:")):
                    queue.append(urljoin(page.url, href))
        assert visited > 5, f"the crawl found only {visited} pages"
    finally:
        context.close()
    assert problems == [], "\n".join(problems[:20])
