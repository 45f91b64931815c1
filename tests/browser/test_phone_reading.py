"""Real browser on a 390 px phone, in Spanish (longer words): the served calibration report and a run's page scroll
their wide parts inside their boxes, never the page (the crawl's phone check covers the app's pages in English)."""

from __future__ import annotations

from sqlmodel import select

from calibrate.demo import DATASET
from calibrate.models import JudgeRun

OVERFLOWING = """[...document.querySelectorAll('body *')]
  .filter((el) => el.getBoundingClientRect().right > innerWidth + 0.5 && !el.closest('.scroll-x, table.grid, table'))
  .slice(0, 5).map((el) => el.tagName + '.' + el.className + '#' + el.id)"""


def test_the_report_and_a_run_page_do_not_scroll_sideways_on_a_phone_in_spanish(load_demo_copy, engine, session, page,
                                                                                   live_server, browser_login):
    load_demo_copy(engine)
    run = session.exec(select(JudgeRun).order_by(JudgeRun.id)).first()
    run.backend, run.model = "openai", "gpt-4o-mini-2024-07-18"
    run.base_url = "https://llm-gateway.internal.example.org/openai/deployments/judges/v1"  # one long unbreakable word
    session.add(run)
    session.commit()
    browser_login("eng", "engineer")
    page.set_extra_http_headers({"Accept-Language": "es-ES,es;q=0.9"})
    page.set_viewport_size({"width": 390, "height": 844})
    for url in (f"/datasets/{DATASET}/calibration/report.html?judge=demo-claims@2&task=claim_support&split=dev",
                f"/runs/{run.id}"):
        page.goto(live_server + url)
        assert page.locator("html").get_attribute("lang") == "es"
        wide = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert wide[0] <= wide[1], f"{url} scrolls sideways at 390 px: {wide} {page.evaluate(OVERFLOWING)}"
