"""The dashboard links the calibration report of its task, split and judge, served by the app: the same bytes
as `calibrate report --format html` (and md, csv) writes for the same options, but for the time it was made."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup

from calibrate.demo import DATASET

JUDGE = "demo-claims@1"
# The report's own generation time (to the second) is the one thing two renderings may not share.
STAMP = re.compile(rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\+00:00| UTC)?")


@pytest.mark.parametrize("fmt", ["html", "md", "csv"])
def test_the_served_report_is_the_command_lines(client, login, runner, demo, fmt):
    login("eng", "engineer")
    board = BeautifulSoup(client.get(f"/datasets/{DATASET}/calibration?task=claim_support&split=dev").data, "html.parser")
    link = board.select_one(f"#judges tr[data-judge='{JUDGE}'] a.report-{fmt}")["href"]
    served = client.get(link)
    assert served.status_code == 200
    assert served.mimetype == {"html": "text/html", "md": "text/markdown", "csv": "text/csv"}[fmt]
    written = runner.invoke(["report", "--dataset", DATASET, "--judge", JUDGE, "--task", "claim_support", "--split", "dev",
                             "--format", fmt])
    assert written.exit_code == 0, written.output
    cli_bytes = written.stdout_bytes
    assert served.data.strip() and STAMP.sub(b"T", served.data).rstrip(b"\n") == STAMP.sub(b"T", cli_bytes).rstrip(b"\n")
    if fmt == "html":
        assert BeautifulSoup(served.data, "html.parser").select_one("title") is not None
        # one self-contained file: its inline style allowed, no script at all
        policy = served.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "style-src 'unsafe-inline'" in policy and "script-src" not in policy


def test_a_report_in_another_format_is_refused_on_the_page(client, login, demo):
    login("eng", "engineer")
    response = client.get(f"/datasets/{DATASET}/calibration/report.pdf?judge={JUDGE}")
    # a GET of a page that cannot be: the 404 page with the message (views/errors.py)
    assert response.status_code == 404 and b"html, md or csv" in response.data


def test_annotators_get_no_report(client, login, demo):
    login("ana", "annotator")
    assert client.get(f"/datasets/{DATASET}/calibration/report.html?judge={JUDGE}").status_code == 403
