"""The Production page on a 390 px phone, in English and Spanish: nothing scrolls sideways, no script error."""

from __future__ import annotations

import pytest
from demo_server import demo_site, login

from calibrate.demo.production import PROD_DATASET


@pytest.fixture(scope="module")
def site(tmp_path_factory, demo_template):
    with demo_site(tmp_path_factory, demo_template) as served:
        yield served


@pytest.mark.parametrize("locale", ["en-US", "es-ES"])
def test_the_production_page_fits_a_phone(browser, site, locale):
    context = browser.new_context(viewport={"width": 390, "height": 844}, locale=locale)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        login(page, site.url, "engineer")
        for url in (f"/datasets/{PROD_DATASET}/production", f"/datasets/{PROD_DATASET}/production?by=day&min=3.5",
                    f"/datasets/{PROD_DATASET}"):
            page.goto(site.url + url)
            assert page.locator("#production-windows article, #queue-auto-form").count() >= 1
            wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert wide[0] <= wide[1], f"{url} scrolls sideways at 390 px ({locale}): {wide}"
        # The windows' chart sits above the cards and fits the phone: drawn (an SVG with the CI band's points), as
        # wide as the page at most, and tall enough to read.
        page.goto(site.url + f"/datasets/{PROD_DATASET}/production")
        chart = page.locator("#production-chart svg")
        assert chart.count() == 1
        box = chart.bounding_box()
        assert box is not None and 0 < box["x"] and box["x"] + box["width"] <= 390 and box["height"] >= 120, box
        assert page.locator("#production-chart").evaluate(
            "el => el.compareDocumentPosition(document.querySelector('#production-windows article')) & 4") == 4
        heading = page.locator("h1").first.inner_text()
        assert PROD_DATASET in heading
    finally:
        context.close()
    assert errors == []
