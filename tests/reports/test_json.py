"""The JSON report is `report.data` unchanged, in the shape of the contract (ARCHITECTURE.md, docs/report.md)."""

from __future__ import annotations

import json
import math

import pytest

from calibrate.reports import FORMATS, render

TOP = ("dataset", "judge", "threshold", "passed", "tasks")
ESTIMATE = ("value", "ci", "status", "note")

CATEGORICAL = {
    "kind": None, "target": None, "n": None, "n_samples": None, "n_unparsed": None, "n_no_gold": None,
    "cohen_kappa": {k: None for k in ESTIMATE},
    "percent_agreement": None,
    "confusion": {"labels": None, "matrix": None},
    "per_label": {"unsupported": {"precision": None, "recall": None, "f1": None}},
    "human": {"n": None, "annotators": None, "pairwise_kappa": None, "n_pairs_sparse": None, "fleiss_kappa": {"value": None},
              "krippendorff_alpha": {"nominal": {"value": None}}},
    "per_annotator": None,
    "grouped": {"by": None, "groups": None, "cohen_kappa": {"value": None}},
    "alignment": {"metric": None, "value": None, "ci": None},
    "passed": None,
}
ORDINAL = {
    "kind": None, "target": None, "n": None, "n_unparsed": None, "n_no_gold": None,
    "spearman_rho": {k: None for k in (*ESTIMATE, "p_value")},
    "kendall_tau": {k: None for k in ESTIMATE},
    "pearson_r": {"value": None, "status": None},
    "weighted_kappa": {"value": None, "status": None},
    "grouped": {"by": None, "groups": None, "spearman_rho": {"value": None}, "kendall_tau": {"value": None},
                "pearson_r": {"value": None}},
    "human": {"n": None, "annotators": None, "krippendorff_alpha": {"ordinal": {"value": None}, "interval": {"value": None}}},
    "alignment": {"metric": None, "value": None, "ci": None},
    "passed": None,
}


def missing_keys(contract: dict, data: dict, path: str = "") -> list[str]:
    """Return the dotted paths of every key of `contract` that `data` lacks."""
    out = []
    for key, sub in contract.items():
        here = f"{path}.{key}" if path else key
        if not isinstance(data, dict) or key not in data:
            out.append(here)
        elif isinstance(sub, dict):
            out += missing_keys(sub, data[key], here)
    return out


def non_finite(value, path="$"):
    """Yield the paths of NaN or infinite numbers anywhere in parsed JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from non_finite(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from non_finite(v, f"{path}[{i}]")


def test_json_has_every_key_of_the_contract(full_report):
    parsed = json.loads(render(full_report, "json"))
    assert missing_keys(dict.fromkeys(TOP), parsed) == []
    assert missing_keys(CATEGORICAL, parsed["tasks"]["claim_support"]) == []
    assert missing_keys(ORDINAL, parsed["tasks"]["answer_quality"]) == []
    assert missing_keys(CATEGORICAL | {"per_label": {"not_relevant": {"precision": None}}},
                        parsed["tasks"]["context_relevance"]) == []
    assert parsed["tasks"]["claim_support"]["alignment"]["metric"] == "cohen_kappa"
    assert parsed["tasks"]["answer_quality"]["alignment"]["metric"] == "spearman_rho"
    assert parsed["tasks"]["claim_support"]["grouped"]["by"] == "metadata.topic"


def test_json_is_the_report_data_unchanged(full_report):
    text = render(full_report, "json")
    assert json.loads(text) == json.loads(json.dumps(full_report.data))
    assert text.startswith('{\n  "dataset": "d"')  # indented by two, keys in the report's order


def test_json_has_no_nan_even_when_statistics_are_undefined(store, report_of):
    store.sample("s1", 2)
    store.sample("s2", 2)
    for sid in ("s1", "s2"):
        for c in range(2):
            store.label("claim_support", "ann1", sid, "supported", claim=c)
            store.verdict("j", "claim_support", sid, "supported", claim=c)
    report = report_of()
    text = render(report, "json")
    assert "NaN" not in text and "Infinity" not in text
    parsed = json.loads(text)
    assert list(non_finite(parsed)) == []
    kappa = parsed["tasks"]["claim_support"]["cohen_kappa"]
    assert kappa["value"] is None and kappa["status"] == "undefined" and kappa["note"]


def test_json_keeps_non_ascii_text(store, report_of):
    store.dataset.description = "Matrona Ruiz: ¿ácido fólico?"
    store.sample("s1", 1)
    store.label("claim_support", "ann1", "s1", "supported", claim=0)
    parsed_text = render(report_of(judge=None), "json")
    assert "¿ácido fólico?" in parsed_text
    assert json.loads(parsed_text)["judge"] is None


def test_unknown_format_names_the_formats(full_report):
    with pytest.raises(ValueError, match="json, html, md, csv"):
        render(full_report, "pdf")
    assert FORMATS == ("json", "html", "md", "csv")
