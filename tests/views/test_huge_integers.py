"""Integers too large for the database, in URLs and form fields: 404 or 400, never a 500 (issue 14, point 8)."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.accounts import get_user
from calibrate.db import write_session
from calibrate.judges import save_version
from calibrate.models import MAX_ID, Assignment, Claim, Judge

HUGE = "99999999999999999999999"
HX = {"HX-Request": "true"}


@pytest.fixture
def world(app, client, engine, session, make_sample, login):
    """An admin logged in, a dataset with one sample assigned to them, a prompt version, a judge."""
    token = login("root", "admin")
    sample = make_sample()
    assignment = Assignment(sample_id=sample.id, user_id=get_user(session, "root").id)
    session.add(assignment)
    session.add(Judge(name="imported-judge", kind="imported"))
    session.commit()
    with write_session(engine) as s:
        save_version(s, "claims", task="claim_support")
    claim = session.exec(select(Claim)).first()
    names = {"name": "d", "judge": "imported-judge", "target": f"claim:{claim.id}", "external_id": "s1", "action": "skip"}
    return {"token": token, "assignment": assignment.id, "claim": claim.id, "names": names}


def _path(rule, values: dict[str, str]) -> str:
    path = rule.rule
    for name, value in values.items():
        path = re.sub(rf"<(?:[^:<>]+:)?{name}>", value, path)
    return path


def _int_arguments(rule) -> list[str]:
    return [name for name, converter in rule._converters.items() if converter.regex == r"\d+"]


def test_every_route_with_an_int_converter_answers_a_huge_number_with_404(app, client, world):
    rules = [rule for rule in app.url_map.iter_rules() if _int_arguments(rule)]
    assert len(rules) >= 16  # every <int:...> route of the app, from its url_map
    for rule in rules:
        for huge in (HUGE, str(MAX_ID + 1)):
            values = {name: (huge if name in _int_arguments(rule) else world["names"].get(name, "claims"))
                      for name in rule.arguments}
            if rule.rule.startswith("/prompts/"):
                values["name"] = "claims"
            path = _path(rule, values)
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                for headers in ({}, HX):
                    response = client.open(path, method=method, data={"csrf_token": world["token"]},
                                           headers={**headers, "X-CSRFToken": world["token"]})
                    assert response.status_code == 404, (method, path, response.status_code)
    # The largest storable id is still an id: it simply names nothing.
    assert client.get(f"/runs/{MAX_ID}").status_code == 404


@pytest.mark.parametrize(("path", "field"), [
    ("/datasets/d?page=" + HUGE, "page"),
    ("/adjudicate?page=" + HUGE, "page"),
    ("/datasets/d?page=x", "page"),
    ("/prompts/claims/diff?a=1&b=" + HUGE, "b"),
    ("/prompts/claims/diff?a=-1&b=1", "a"),
])
def test_a_query_integer_out_of_range_is_400_naming_it(client, world, path, field):
    response = client.get(path)
    assert response.status_code == 400, path
    assert f"{field} must be a whole number" in BeautifulSoup(response.data, "html.parser").get_text()


@pytest.mark.parametrize(("fields", "named"), [
    ({"evidence": HUGE}, "evidence"),
    ({"evidence": "-3"}, "evidence"),
    ({"evidence_sentence": f"{HUGE}:0"}, "evidence_sentence"),
    ({"evidence_sentence": f"1:{HUGE}"}, "evidence_sentence"),
])
def test_a_huge_number_in_a_label_form_is_400_naming_the_field(client, world, fields, named):
    data = {"task": "claim_support", "target": world["names"]["target"], "value": "supported", **fields}
    url = f"/annotate/{world['assignment']}/label"
    script = client.post(url, data=data, headers={**HX, "X-CSRFToken": world["token"]})
    assert script.status_code == 400 and script.headers["X-Invalid-Field"] == named
    assert named in script.get_data(as_text=True)
    page = client.post(url, data={**data, "csrf_token": world["token"]})
    assert page.status_code == 400 and named in page.get_data(as_text=True)


@pytest.mark.parametrize("target", [f"claim:{HUGE}", f"claim:{MAX_ID + 1}"])
def test_a_huge_target_id_names_nothing(client, world, target):
    url = f"/annotate/{world['assignment']}"
    label = client.post(f"{url}/label", data={"task": "claim_support", "target": target, "value": "supported"},
                        headers={**HX, "X-CSRFToken": world["token"]})
    assert label.status_code == 404
    assert client.get(f"{url}/history", query_string={"task": "claim_support", "target": target}).status_code == 404
    assert client.get(f"/datasets/d/calibration/judges/imported-judge/disagreements/{target}").status_code == 404
    fewshot = client.post(f"/datasets/d/calibration/judges/imported-judge/disagreements/{target}/fewshot",
                          data={"csrf_token": world["token"]})
    assert fewshot.status_code == 303  # a refused form: back, with the message
    assert f"no target {target}" in client.get(fewshot.headers["Location"]).get_data(as_text=True)


@pytest.mark.parametrize(("fields", "named"), [({"n": HUGE}, "n"), ({"seed": HUGE}, "seed"), ({"overlap": "two"}, "overlap")])
def test_the_assign_form_refuses_a_bad_number_naming_it(client, world, fields, named):
    response = client.post("/admin/assign", data={"csrf_token": world["token"], "dataset": "d", **fields})
    assert response.status_code == 400 and f"{named} must be a whole number" in response.get_data(as_text=True)


def test_a_run_limit_too_large_is_400(client, world):
    response = client.post("/prompts/claims/1/run", data={"csrf_token": world["token"], "dataset": "d", "backend": "baseline",
                                                          "limit": HUGE})
    assert response.status_code == 400 and "limit must be a whole number" in response.get_data(as_text=True)
