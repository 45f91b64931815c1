"""Real browser: the calibration dashboard of a dataset imported without splits opens on every sample and shows
the figures of every labelled target (not a `dev` split that does not exist)."""

from __future__ import annotations

from labelstore import Store


def test_an_unsplit_dataset_opens_showing_every_labelled_target(page, live_server, browser_login, session, app):
    app.config["BOOTSTRAP"] = 50
    store = Store(session)
    for i in range(5):
        store.sample(f"s{i}", n_claims=2)
        for claim in range(2):
            gold = "supported" if (i + claim) % 2 else "unsupported"
            for annotator in ("ann1", "ann2"):
                store.label("claim_support", annotator, f"s{i}", gold, claim=claim)
            store.verdict("gpt4", "claim_support", f"s{i}", "supported" if i == 0 else gold, claim=claim)
    store.commit()
    browser_login("eng", "engineer")
    page.goto(f"{live_server}/datasets/d/calibration")
    assert page.locator("select[name=split]").input_value() == "all"
    assert page.locator("#dashboard-message").count() == 0 and page.locator("#unsplit-notice").count() == 0
    assert "10 labelled targets" in page.locator("#dashboard-scope").inner_text()
    row = page.locator("#judges tr[data-judge='gpt4']")
    assert row.locator(".n").inner_text() == "10"
    assert row.locator(".value").inner_text().startswith("0.")  # κ on the 10 targets: 9 agree, 1 does not
    assert row.locator("td.decision").get_attribute("data-decision") in ("pass", "fail", "undecided")
    assert page.locator("#versions-chart svg circle.estimate").count() == 1
