"""Every page of the demo in Spanish shows none of the product's English texts (issue 21): one browser context
with a Spanish Accept-Language, the workbench as an annotator, then every page an admin reaches (the crawl of
test_crawl.py, once per URL shape), checked against the built-in tasks' and the demo's English descriptions,
guidelines and rubric levels, then the calibration pages that say why they show nothing (the frozen test split, no
judges picked) against those messages' English. An edit box (textarea, input) may hold the stored text an engineer edits; the page around it may not."""

from __future__ import annotations

from collections import deque
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from demo_server import demo_site, login
from test_crawl import DOWNLOAD, LINKS, SKIP, _shape, escaped_markup

from calibrate.demo import DATASET, PREFERENCE_DESCRIPTION, PREFERENCE_GUIDELINES
from calibrate.reasons import Reason
from calibrate.tasks import BUILTIN_TASKS

MAX_PAGES = 80
ENGLISH = sorted({line for spec in BUILTIN_TASKS if spec.name in ("claim_support", "answer_quality", "context_relevance")
                  for line in (spec.description, *spec.guidelines.split("\n"))}
                 | {"wrong, unsafe or unrelated to the question", "mostly right, but", PREFERENCE_DESCRIPTION,
                    *PREFERENCE_GUIDELINES.split("\n")}
                 # what the calibration pages say instead of scores (issue 21: built as English text before)
                 | {str(Reason("test_split_frozen", dataset=DATASET)), str(Reason("compare_pick_two")),
                    str(Reason("compare_pick_different", judge="demo-claims@1"))})
# Pages that show nothing but why (the crawl skips error statuses and the forms' choices): the frozen test split on the
# disagreement list, the compare and alt-test pages, and the compare page before two judges are picked; each message
# element must be on the page.
CALIBRATION = f"/datasets/{DATASET}/calibration"
MESSAGES = [(f"{CALIBRATION}/judges/demo-claims@1/disagreements?split=test", "#disagreement-message"),
            (f"{CALIBRATION}/compare?split=test&a=demo-claims@1&b=demo-claims@2", "#compare-message"),
            (f"{CALIBRATION}/judges/demo-claims@1/alt-test?split=test", "#alt-test-message"),
            (f"{CALIBRATION}/compare?split=dev&a=demo-claims@1", "#compare-message"),
            (f"{CALIBRATION}/compare?split=dev&a=demo-claims@1&b=demo-claims@1", "#compare-message")]
# The page's text, hidden parts (closed <details>, tooltips' hosts) included, edit boxes and scripts left out.
TEXT = """(() => { const copy = document.body.cloneNode(true);
  copy.querySelectorAll('textarea, script, style, input').forEach((el) => el.remove());
  return copy.textContent; })()"""


@pytest.fixture(scope="module")
def site(tmp_path_factory, demo_template):
    with demo_site(tmp_path_factory, demo_template) as served:
        yield served


def test_no_english_product_text_on_any_spanish_page(browser, site):
    assert len(ENGLISH) >= 15 and "1: wrong, unsafe or unrelated to the question." in ENGLISH
    context = browser.new_context(locale="es-ES", extra_http_headers={"Accept-Language": "es-ES,es;q=0.9"})
    page = context.new_page()
    found: list[str] = []
    checked = 0

    def check(url: str) -> None:
        nonlocal checked
        text = page.evaluate(TEXT)
        checked += 1
        found.extend(f"{english!r} on {url}" for english in ENGLISH if english in text)
        found.extend(f"markup shown as text {shown} on {url}" for shown in [escaped_markup(text)] if shown)

    try:
        login(page, site.url, "dra.garcia")  # the workbench: an item with the rubric and the guidelines
        page.goto(f"{site.url}/annotate/next")
        assert page.locator("html").get_attribute("lang") == "es"
        assert page.locator("#guidelines").count() == 1, page.url
        check(page.url)
        context.clear_cookies()
        login(page, site.url, "admin")
        origin = urlsplit(site.url).netloc
        queue, seen, shapes = deque([page.url, f"{site.url}/calibration", f"{site.url}/tasks", f"{site.url}/admin"]), set(), set()
        while queue and len(shapes) < MAX_PAGES:
            url = urldefrag(queue.popleft())[0]
            parts = urlsplit(url)
            if url in seen or parts.netloc != origin or SKIP.match(parts.path) or DOWNLOAD.search(parts.path):
                continue
            seen.add(url)
            if _shape(url) in shapes:
                continue
            shapes.add(_shape(url))
            response = page.goto(url)
            if response is None or response.status >= 400:
                continue  # test_crawl.py reports error statuses
            check(url)
            queue.extend(urljoin(page.url, href) for href in page.evaluate(LINKS) if href and not href.startswith(("mailto:", "javascript:")))
        for path, message in MESSAGES:
            page.goto(site.url + path)
            assert page.locator(message).count() == 1, path
            check(path)
    finally:
        context.close()
    assert checked > 10, f"only {checked} pages checked"
    assert found == [], "\n".join(found[:20])
