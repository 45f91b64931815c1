"""The dashboard opens on the data that exists: every sample for data imported without splits, dev when the
dataset has it, and a sentence (English or Spanish) saying why a choice shows nothing — including labelled
samples that `calibrate sample --split` left without a split."""

from __future__ import annotations

from calibrate.calibration import Options
from calibrate.loop.dashboard import dashboard
from calibrate.loop.testsplit import opening_split
from calibrate.models import Sample

SPANISH = {"Accept-Language": "es"}


def _unsplit(store, n=6):
    """Six samples of two claims each, labelled by two annotators, and an imported judge with verdicts on them."""
    for i in range(n):
        sid = f"s{i}"
        store.sample(sid, n_claims=2)
        for claim in range(2):
            gold = "supported" if (i + claim) % 2 else "unsupported"
            store.label("claim_support", "ann1", sid, gold, claim=claim)
            store.label("claim_support", "ann2", sid, gold if i else "supported", claim=claim)
            store.verdict("gpt4", "claim_support", sid, gold if i != 2 else "supported", claim=claim)
    store.commit()


def test_the_opening_split_rule():
    assert opening_split([]) is None  # imported without splits: every sample
    assert opening_split(["train", "dev", "test"]) == "dev"
    assert opening_split(["train", "dev"]) == "dev"
    assert opening_split(["train"]) is None  # no frozen test split: every sample
    assert opening_split(["train", "test"]) == "train"
    assert opening_split(["test"]) is None  # the rest is unsplit: the page says so


def test_an_unsplit_dataset_opens_on_every_sample(store, session):
    _unsplit(store)
    board = dashboard(session, "d", options=Options(bootstrap=50))
    assert board.split is None and not board.message and not board.notice
    assert board.n_labelled == 12
    [row] = board.rows
    # every labelled target with gold: s0's first claim is a tie between the two annotators (no gold)
    assert row.judge == "gpt4" and row.ran and row.n == 11 and row.value is not None


def test_a_split_the_dataset_does_not_have_says_so(store, session):
    _unsplit(store)
    board = dashboard(session, "d", split="dev")
    assert board.message == ("d has no sample in split 'dev' (splits: none; view all samples, or assign splits with "
                             "calibrate sample --split)")
    assert board.message_reason == {"code": "dashboard_no_split_none", "dataset": "d", "split": "dev"}


def test_the_page_opens_on_all_samples_and_words_refusals_in_spanish(store, app, client, login, soup):
    _unsplit(store)
    app.config["BOOTSTRAP"] = 50
    login("eng", "engineer")
    page = soup(client.get("/datasets/d/calibration"))
    assert page.select_one("select[name=split] option[selected]")["value"] == "all"
    assert page.select_one("#dashboard-message") is None
    assert [r["data-judge"] for r in page.select("#judges tbody tr[data-judge]")] == ["gpt4"]
    assert page.select_one("#judges tr[data-judge='gpt4'] .n").get_text() == "11"
    dev = soup(client.get("/datasets/d/calibration?split=dev", headers=SPANISH))
    text = dev.select_one("#dashboard-message").get_text()
    assert text.startswith("d no tiene ninguna muestra en la partición 'dev'") and "calibrate sample --split" in text
    none = soup(client.get("/datasets/d/calibration?task=answer_quality", headers=SPANISH))
    assert none.select_one("#dashboard-message").get_text().startswith("no hay etiquetas de answer_quality")
    # the other pages open on the same split: the disagreements of the judge on every sample
    listed = client.get("/datasets/d/calibration/judges/gpt4/disagreements?task=claim_support")
    assert listed.status_code == 200 and b"s2" in listed.data


def test_sampling_only_a_few_items_into_splits_is_said_with_how_to_split_the_rest(store, session, app, client, login, soup):
    """`calibrate sample --n 2 --split dev=0.5,test=0.5` on 6 labelled samples: dev opens with 1 sample and says 4 have
    no split; "all samples" is refused (it includes test) and says the same, with the command that splits the rest."""
    _unsplit(store)
    for sid, split in (("s0", "dev"), ("s1", "test")):
        sample = session.get(Sample, store.samples[sid].id)
        sample.split = split
    session.commit()
    board = dashboard(session, "d", options=Options(bootstrap=50))
    assert board.split == "dev" and board.unsplit_labelled == 4 and board.n_labelled == 2
    assert board.notice.startswith("4 labelled sample(s) of d without a split (calibrate sample --split splits only "
                                   "the samples it takes): no split shows them")
    assert "calibrate sample --dataset d --fraction 1 --split SPEC" in board.notice
    everything = dashboard(session, "d", split=None)
    assert everything.message.startswith("all samples of d include the frozen test split: choose another split (dev); "
                                         "4 labelled sample(s) of d without a split")
    app.config["BOOTSTRAP"] = 50
    login("eng", "engineer")
    page = soup(client.get("/datasets/d/calibration", headers=SPANISH))
    notice = page.select_one("#unsplit-notice").get_text()
    assert notice.startswith("4 muestras etiquetadas de d sin partición")
    assert "calibrate sample --dataset d --fraction 1 --split SPEC" in notice
    refused = soup(client.get("/datasets/d/calibration?split=all", headers=SPANISH))
    text = refused.select_one("#dashboard-message").get_text()
    assert "incluyen la partición de prueba congelada" in text and "4 muestras etiquetadas de d" in text
    assert refused.select_one("#judges") is None
