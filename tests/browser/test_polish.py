"""Real browser on the demo data: where decisions are made and how the workbench speaks.

The annotator lands on her queue; the disagreement page shows the retrieved contexts with the
experts' evidence; every refused htmx request shows in the notice bar; the help overlay opens at
its top; no page scrolls sideways on a 390 px phone; the documentation's screenshots (docs/img,
rewritten only with CALIBRATE_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from demo_server import demo_site, login
from playwright.sync_api import expect
from sqlmodel import Session, select

from calibrate.demo import DATASET
from calibrate.models import Assignment, Claim, Context, Label, Sample, User

JUDGE = "demo-claims@1"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
MAX_SCREENSHOT_BYTES = 200_000
# The elements that stick out on the right (outside a scroll box): named in a failure.
OVERFLOWING = """[...document.querySelectorAll('body *')]
  .filter((el) => el.getBoundingClientRect().right > innerWidth + 0.5 && !el.closest('.scroll-x, table.grid'))
  .slice(0, 5).map((el) => el.tagName + '.' + el.className + '#' + el.id)"""


@pytest.fixture(scope="module")
def site(tmp_path_factory, demo_template):
    with demo_site(tmp_path_factory, demo_template) as served:
        yield served


def _first_disagreement(page, site):
    page.goto(f"{site.url}/datasets/{DATASET}/calibration/judges/{JUDGE}/disagreements?task=claim_support&split=dev")
    return page.locator("#disagreements tbody tr").first


def test_the_annotator_lands_on_her_queue_and_engineers_on_the_datasets(page, browser, site):
    login(page, site.url, "dra.garcia")
    assert page.url == f"{site.url}/annotate"
    page.goto(f"{site.url}/")
    assert page.url == f"{site.url}/annotate"
    context = browser.new_context()
    try:
        other = context.new_page()
        login(other, site.url, "engineer")
        assert other.url == f"{site.url}/datasets"
        other.goto(f"{site.url}/")
        assert other.url == f"{site.url}/datasets"
    finally:
        context.close()


def test_the_disagreement_page_shows_the_contexts_with_the_experts_evidence(page, site):
    login(page, site.url, "engineer")
    row = _first_disagreement(page, site)
    target = row.get_attribute("data-target")
    assert target.startswith("claim:")
    with Session(site.engine, expire_on_commit=False) as s:
        claim = s.get(Claim, int(target.split(":")[1]))
        sample = s.get(Sample, claim.sample_id)
        label = s.exec(select(Label).where(Label.target_key == target, Label.adjudicated.is_(False))).first()
        who = s.get(User, label.annotator_id).username
        label.evidence = [1, {"context": 0, "sentence": 0}]  # context #2 whole, the first sentence of context #1
        s.add(label)
        s.commit()
        ranks = s.exec(select(Context.rank).where(Context.sample_id == sample.id, Context.active.is_(True))).all()
    # the list names the target as people do and shows the claim's text
    name = f"{sample.external_id} · claim {claim.index + 1}"
    assert row.locator("td.target-name").inner_text() == name
    assert row.locator("td.target-text").inner_text().rstrip("…")[:40] == claim.text[:40]
    row.locator("td.target-name a").click()
    page.wait_for_url(re.compile(r".*/disagreements/claim:\d+.*"))
    assert page.locator("#target-name").inner_text() == name
    contexts = page.locator("#contexts li.marked-context")
    expect(contexts).to_have_count(len(ranks))
    assert [contexts.nth(i).locator(".rank").inner_text() for i in range(len(ranks))] == [f"#{i + 1}" for i in range(len(ranks))]
    first, second = contexts.nth(0), contexts.nth(1)
    assert second.locator(".doc-id").inner_text()
    assert f"marked as evidence by {who}" in second.locator(".evidence-by").inner_text()
    assert first.locator("mark.evidence sup.who").inner_text() == who
    # the contexts stay in view beside the case (sticky) on a desktop
    assert page.evaluate("getComputedStyle(document.querySelector('.decision-side')).position") == "sticky"


def test_a_refused_htmx_request_shows_the_servers_message_in_the_notice_bar(page, site):
    login(page, site.url, "admin")
    page.goto(f"{site.url}/adjudicate?dataset={DATASET}&task=claim_support&show=all")
    form = page.locator("#disputes form.decide").first
    form.locator("input[name=note]").fill("una nota")
    page.route("**/adjudicate/**", lambda route: route.fulfill(status=409, content_type="text/plain",
                                                                body="This target was decided meanwhile."))
    form.locator("button[name=value]").first.click()
    notice = page.locator("#notice[role=alert]")
    expect(notice).to_have_text("Refused (409): This target was decided meanwhile.")
    box = notice.bounding_box()
    assert box and box["y"] + box["height"] <= page.viewport_size["height"]
    page.unroute("**/adjudicate/**")
    # a request that never reaches the server says so too
    page.route("**/adjudicate/**", lambda route: route.abort())
    form.locator("button[name=value]").first.click()
    expect(notice).to_contain_text("could not be reached")


def _open_item(page, site, username="dra.garcia"):
    with Session(site.engine) as s:
        user = s.exec(select(User).where(User.username == username)).one()
        assignment = s.exec(select(Assignment).where(Assignment.user_id == user.id).order_by(Assignment.id)).first()
    page.goto(f"{site.url}/annotate/{assignment.id}")
    page.wait_for_selector("#annotate")
    return assignment


def test_the_help_overlay_opens_at_its_top_and_the_item_has_a_heading(page, site):
    login(page, site.url, "dra.garcia")
    _open_item(page, site)
    assert page.locator("h1").count() == 1 and page.locator("h1 #external-id").inner_text().startswith("demo-")
    page.keyboard.press("?")
    dialog = page.locator("dialog#help")
    expect(dialog).to_be_visible()
    assert page.evaluate("document.getElementById('help').scrollTop") == 0
    box, view = page.locator("#help-title").bounding_box(), page.viewport_size
    assert 0 <= box["y"] and box["y"] + box["height"] <= view["height"]
    # the rationale box is a real text area, several lines high
    assert page.locator(".cell form.rationale textarea").first.get_attribute("rows") == "3"


@pytest.mark.parametrize("role", ["engineer", "dra.garcia"])
def test_no_page_scrolls_sideways_on_a_phone(browser, site, role):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        login(page, site.url, role)
        if role == "engineer":
            urls = [f"/datasets/{DATASET}/calibration?task=claim_support&split=dev",
                    f"/datasets/{DATASET}/calibration/judges/{JUDGE}/disagreements?task=claim_support&split=dev",
                    f"/datasets/{DATASET}/calibration/compare?task=claim_support&split=dev&a=demo-claims@1&b=demo-claims@2",
                    "/datasets", "/adjudicate", "/runs"]
        else:
            urls = ["/annotate"]
        for url in urls:
            page.goto(site.url + url)
            wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            culprits = page.evaluate(OVERFLOWING) if wide[0] > wide[1] else []
            assert wide[0] <= wide[1], f"{url} scrolls sideways at 390 px: {wide} {culprits}"
        if role != "engineer":
            _open_item(page, site, role)
            wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert wide[0] <= wide[1], f"the item page scrolls sideways at 390 px: {wide}"
            # the navigation wraps inside the phone's width
            box = page.locator(".topbar").bounding_box()
            assert box["x"] + box["width"] <= 390
    finally:
        context.close()
    assert errors == []


def test_the_documentation_screenshots(browser, site, tmp_path):
    """docs/annotation.md's screenshots of the item page: desktop in English and Spanish, phone (1× scale, small PNGs)."""
    folder = DOCS_IMG if os.environ.get("CALIBRATE_UPDATE_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    desktop, phone = {"width": 1200, "height": 720}, {"width": 390, "height": 844}
    for name, viewport, locale in (("annotate-desktop-en.png", desktop, "en-US"), ("annotate-desktop-es.png", desktop, "es-ES"),
                                   ("annotate-phone-en.png", phone, "en-US")):
        context = browser.new_context(viewport=viewport, device_scale_factor=1, locale=locale)
        page = context.new_page()
        try:
            login(page, site.url, "matrona.ruiz")
            _open_item(page, site, "matrona.ruiz")
            page.screenshot(path=str(folder / name))
        finally:
            context.close()
        size = (folder / name).stat().st_size
        assert 0 < size <= MAX_SCREENSHOT_BYTES, f"{name}: {size} bytes"


def test_the_dashboard_table_is_not_clipped_on_a_wide_screen(browser, site):
    """At 1,400 px the judges' table is shown whole (no hidden columns to scroll to); on a phone it scrolls in its box."""
    url = f"{site.url}/datasets/{DATASET}/calibration?task=claim_support&split=dev"
    sizes = {}
    for width in (1400, 390):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        try:
            login(page, site.url, "engineer")
            page.goto(url)
            sizes[width] = page.evaluate("""(() => { const box = document.querySelector('#judges').closest('.scroll-x');
                return [box.scrollWidth, box.clientWidth, document.documentElement.scrollWidth, innerWidth,
                        document.querySelector('#judges th:last-child').getBoundingClientRect().right]; })()""")
        finally:
            context.close()
    table, box, page_width, window, last_column = sizes[1400]
    assert table <= box and last_column <= window, f"the table is clipped at 1,400 px: {sizes[1400]}"
    assert page_width <= window
    assert sizes[390][2] <= sizes[390][3]  # too wide for a phone: it scrolls inside its box, never the page


# The words of the judges table broken across lines inside the word (a hyphen or a slash may end a line): one
# Range per word, which a line break splits into several boxes.
BROKEN_WORDS = """(() => { const broken = [];
  const walker = document.createTreeWalker(document.querySelector('#judges'), NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, text = node.textContent;
    for (const match of text.matchAll(/[^\\s\\-\\/·]+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (lines.size > 1) broken.push(match[0]);
    }
  }
  return broken.slice(0, 8); })()"""


@pytest.mark.parametrize(("width", "language"), [(1280, "en"), (1400, "en"), (1280, "es")])
def test_the_dashboard_table_never_breaks_a_word_to_fit(browser, site, width, language):
    """On a laptop's window the judges table keeps its words whole (what does not fit scrolls inside its box): forced
    into the window, it broke judge names, intervals and the Evaluate button letter by letter."""
    context = browser.new_context(viewport={"width": width, "height": 900}, extra_http_headers={"Accept-Language": language})
    page = context.new_page()
    try:
        login(page, site.url, "engineer")
        page.goto(f"{site.url}/datasets/{DATASET}/calibration?task=claim_support&split=dev")
        expect(page.locator("#judges tbody tr")).not_to_have_count(0)
        assert page.evaluate(BROKEN_WORDS) == []
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")  # the box scrolls, never the page
    finally:
        context.close()
