"""The dataset page speaks plainly (issue 36): its links and code render as links and code in both languages, the
feedback column says thumbs in words, the production source says what to add for skipped traces, how traces were
sampled upstream and the dataset's retention; the Production page says how to get a missing calibration figure."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from test_production_page import ENGLISH, SPANISH, _login, _page

from calibrate.demo import DATASET
from calibrate.demo.production import PROD_DATASET

ESCAPED = ("&lt;", "&gt;", "<a ", "<code>", "</code>", "<em>")


def _text(soup: BeautifulSoup) -> str:
    for tag in soup.select("textarea, script, style, input"):
        tag.decompose()
    return soup.get_text()


@pytest.mark.parametrize("headers", [ENGLISH, SPANISH])
def test_the_demo_dataset_pages_render_their_links_and_code(client, demo_engine, headers):
    _login(client, "engineer", "demo-engineer")
    for name in (DATASET, PROD_DATASET):
        page = _page(client.get(f"/datasets/{name}", headers=headers))
        text = _text(page)
        assert not [piece for piece in ESCAPED if piece in text], name
        golden = page.select_one("#golden-sets")
        if golden is not None and golden.select_one("p.muted code"):
            command = golden.select_one("p.muted code").get_text()
            assert command.startswith(f"calibrate golden create NAME --dataset {name} ")
            # a dataset without splits (the production source) is offered --where, one with splits --split test
            assert command.endswith("--where metadata.FIELD=VALUE" if name == PROD_DATASET else "--split test")
    claims = _page(client.get(f"/datasets/{DATASET}", headers=headers)).select_one("#claim-sets")
    if claims is not None and "/prompts" in str(claims):
        link = claims.select_one("a[href='/prompts']")
        assert link is not None and link.get_text() in ("Prompts", "Prompts")


def test_thumbs_are_words_in_the_readers_language(client, demo_engine):
    _login(client, "engineer", "demo-engineer")
    found = {}
    for headers in (ENGLISH, SPANISH):
        page = _page(client.get(f"/datasets/{PROD_DATASET}", headers=headers))
        found[headers["Accept-Language"]] = {badge.get_text() for badge in page.select("#samples [data-feedback='-1']")}
    assert found == {"en": {"thumbs down"}, "es-ES,es;q=0.9": {"pulgar abajo"}}


def test_the_production_page_says_how_to_get_a_calibration_figure(client, demo_engine):
    """A judge with no verdicts on labels outside the production streams: the page says how to get the figure."""
    from sqlmodel import Session, select

    from calibrate.models import Dataset, Judge, Sample, Verdict

    with Session(demo_engine) as session:  # the production judge's verdicts outside production go: no calibration figure
        judge = session.exec(select(Judge).where(Judge.name == "demo-quality@1")).one()
        prod = session.exec(select(Dataset).where(Dataset.name == PROD_DATASET)).one()
        for verdict in session.exec(select(Verdict).join(Sample, Sample.id == Verdict.sample_id)
                                    .where(Verdict.judge_id == judge.id, Sample.dataset_id != prod.id)):
            session.delete(verdict)
        session.commit()
    _login(client, "engineer", "demo-engineer")
    en = _page(client.get(f"/datasets/{PROD_DATASET}/production", headers=ENGLISH)).get_text(" ", strip=True)
    assert "to get one, run the same judge version on a labelled dataset" in en
    es = _page(client.get(f"/datasets/{PROD_DATASET}/production", headers=SPANISH)).get_text(" ", strip=True)
    assert "para obtenerlo, ejecute la misma versión del juez sobre un conjunto de datos etiquetado" in es
