"""Real browser: log in, browse, hostile text stays text."""

from __future__ import annotations

from hostile import XSS_ANSWER, XSS_QUESTION


def test_login_and_see_datasets(page, live_server, browser_login, make_sample):
    make_sample(dataset="demo-x", is_demo=True)
    browser_login("eng", "engineer")
    assert page.locator("#datasets tbody tr").count() == 1
    assert page.locator("#datasets .badge.demo").inner_text() == "demo"


def test_hostile_text_renders_as_text_and_runs_nothing(page, live_server, browser_login, make_sample):
    make_sample()
    browser_login()
    page.goto(f"{live_server}/datasets/d/samples/s1")
    assert page.locator("#question").inner_text() == XSS_QUESTION
    assert page.locator("#answer").inner_text() == XSS_ANSWER
    # No element was created from the hostile markup.
    assert page.locator("article.item img").count() == 0
    assert page.locator("article.item a[href^='javascript']").count() == 0
    assert page.evaluate("document.querySelectorAll('script:not([src]):not(#calibrate-strings)').length") == 0


def test_csp_blocks_inline_script(page, live_server, browser_login):
    browser_login()
    # Even if markup got in, the Content-Security-Policy would refuse to run an inline script.
    page.evaluate("""() => { const s = document.createElement('script'); s.textContent = 'window.ran = 1'; document.body.appendChild(s); }""")
    assert page.evaluate("window.ran === undefined")
