"""The report's versions section: every version of the judge's prompt, what changed, the latest two compared."""

from __future__ import annotations

import json
import re

from bs4 import BeautifulSoup

from calibrate.calibration import Options
from calibrate.calibration.compare import compare_judges
from calibrate.demo import DATASET


def test_report_versions_section_json_md_html(demo_engine, session, runner):
    out = runner.invoke(["report", "--dataset", DATASET, "--judge", "demo-claims@1", "--split", "dev", "--bootstrap", "200",
                         "--versions"])
    assert out.exit_code == 0, out.output
    section = json.loads(out.output)["versions"]
    assert [v["judge"] for v in section["versions"]] == ["demo-claims@1", "demo-claims@2"]
    assert section["versions"][0]["changed"] == [] and "few-shots" in section["versions"][1]["changed"]
    dev = json.loads(runner.invoke(["report", "--dataset", DATASET, "--judge", "demo-claims@2", "--split", "dev",
                                    "--bootstrap", "200"]).output)["tasks"]["claim_support"]["alignment"]
    assert section["versions"][1]["value"] == dev["value"] and section["versions"][1]["ci"] == dev["ci"]
    expected = compare_judges(session, DATASET, "demo-claims@1", "demo-claims@2", task="claim_support",
                              options=Options(bootstrap=200, split="dev"))
    everywhere = compare_judges(session, DATASET, "demo-claims@1", "demo-claims@2", task="claim_support", options=Options(bootstrap=200))
    comparison = section["comparison"]
    # the comparison honours --split like the rest of the report: the dev numbers, not every sample's
    assert comparison["scope"] == "the samples of split dev" and comparison["common_n"] == expected["common_n"] < everywhere["common_n"]
    assert comparison["difference"] == expected["difference"] and comparison["mcnemar"] == expected["mcnemar"]
    assert comparison["flips"] == {"fixed": len(expected["flips"]["fixed"]), "broken": len(expected["flips"]["broken"])}
    md = runner.invoke(["report", "--dataset", DATASET, "--judge", "demo-claims@2", "--bootstrap", "200", "--versions",
                        "--format", "md"]).output
    assert "## Versions of demo" in md and "McNemar p" in md
    assert re.search(r"Scored on the \d+ targets common to all versions", md)
    assert "Changed: params, few\\_shots." in md
    html = BeautifulSoup(runner.invoke(["report", "--dataset", DATASET, "--judge", "demo-claims@2", "--bootstrap", "200",
                                        "--versions", "--format", "html"]).output, "html.parser")
    assert len(html.select("#versions tbody tr")) == 2 and "McNemar" in html.select_one("#versions .comparison").get_text()
    assert [r["data-decision"] for r in html.select("#versions tbody tr")] == ["undecided", "undecided"]
    assert "targets common to all versions" in html.select_one("#versions .common-targets").get_text()
    bad = runner.invoke(["report", "--dataset", DATASET, "--versions"])
    assert bad.exit_code == 2 and "--versions needs --judge" in bad.output
