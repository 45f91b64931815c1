"""Every refusal a web page can show is raised with a Reason, so the page words it in the reader's language.

A `CalibrateError` raised with a `Reason` keeps its English line for the command line and carries a code
that views/errors.py words in the reader's language (docs/i18n.md, "Refusals"); one raised with an English
string is shown as it is, English on a Spanish page. This walks the raise sites of the modules whose
refusals reach a page (the Run buttons, the prompt editor, the calibration pages and the dashboard, the
workbench, the Tasks and team pages) and fails on any that builds its message from English text: a string
literal, an f-string, a concatenation or formatting, `str(…)`, or a name bound to one of those in the same
function. New English-only refusals there are caught here, not on a Spanish page.

Left out on purpose (documented in docs/i18n.md): the command line's own modules and the file importers
(`calibrate/cli/`, `calibrate/ingest/` but sampling, which the team page's Assign form calls), and the errors
a run records on an item instead of refusing a request (`RenderError` of a run's render,
`BackendError` and its kinds: a provider's answer, kept as the run's log). The template sandbox's own
limits (judges/sandbox.py), which the prompt editor shows, are walked with `RenderError` counted as a
refusal; so are the messages the calibration pages build themselves (`message = …` in calibrate/loop/).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from prompt_helpers import claims_prompt_edit_form

from calibrate.annotation.labels import EvidenceError, TargetRetired
from calibrate.annotation.queue import Incomplete
from calibrate.errors import CalibrateError
from calibrate.judges.errors import BackendError, RenderError
from calibrate.reasons import TEMPLATES, Reason, join

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = PROJECT_ROOT / "calibrate"

# The modules whose refusals reach a web page (directly or through the domain call a view makes).
WEB_MODULES = (
    "accounts.py", "datasets.py", "lookup.py", "task_scopes.py", "tasks.py",
    "annotation/adjudication.py", "annotation/claim_edits.py", "annotation/guidelines.py", "annotation/items.py",
    "annotation/label_posts.py", "annotation/labels.py", "annotation/queue.py", "annotation/review.py",
    "annotation/team.py", "annotation/uncertainty.py",
    "calibration/alttest.py", "calibration/calibrated.py", "calibration/compare.py", "calibration/frames.py",
    "calibration/report.py",
    "ingest/sampling.py",
    "judges/backends.py", "judges/baseline.py", "judges/embeddings.py", "judges/extraction.py", "judges/metrics.py",
    "judges/params.py", "judges/render.py", "judges/runner.py", "judges/versions.py",
    "loop/dashboard.py", "loop/disagreements.py", "loop/next_step.py", "loop/testsplit.py",
    "views/account.py", "views/adjudicate.py", "views/admin.py", "views/annotate.py", "views/calibration_loop.py",
    "views/datasets.py", "views/guidelines.py", "views/prompts.py", "views/runs.py", "views/tasks.py",
)
EXEMPT = {"RenderError", "BackendError", "FatalBackendError", "RequestRejected", "RetryableError", "MalformedResponse",
          "RateLimited", "Unreachable"}


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


# Make sure every error class of the web modules is loaded before collecting the names.
assert EvidenceError and TargetRetired and Incomplete and BackendError and RenderError
REFUSALS = {cls.__name__ for cls in _subclasses(CalibrateError) | {CalibrateError}} - EXEMPT


def _is_english(node: ast.AST) -> bool:
    """Whether an expression builds a message from English text."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _is_english(node.left) or _is_english(node.right) or isinstance(node.op, ast.Mod)
    if isinstance(node, ast.IfExp):
        return _is_english(node.body) or _is_english(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str":
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "join"):
        return True
    return False


def _bindings(function: ast.AST) -> dict[str, list[ast.AST]]:
    out: dict[str, list[ast.AST]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)
    return out


def english_refusals(source: str) -> list[tuple[int, str]]:
    """Return (line, code) of every refusal in `source` raised with a message made of English text."""
    tree = ast.parse(source)
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] + [tree]
    seen: set[int] = set()
    for scope in scopes:
        bound = _bindings(scope)
        for node in ast.walk(scope):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)) or id(node) in seen:
                continue
            seen.add(id(node))
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name not in REFUSALS or not node.exc.args:
                continue
            message = node.exc.args[-1] if name == "EvidenceError" else node.exc.args[0]  # EvidenceError(field, reason)
            english = _is_english(message) or (
                isinstance(message, ast.Name) and any(_is_english(value) for value in bound.get(message.id, [])))
            if english:
                found.append((node.lineno, ast.unparse(node.exc)[:120]))
    return found


def english_messages(source: str) -> list[tuple[int, str]]:
    """Return (line, code) of every `….message = …` in `source` set from English text (a page's message)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "message" for t in node.targets):
            if _is_english(node.value) and not (isinstance(node.value, ast.Constant) and node.value.value == ""):
                found.append((node.lineno, ast.unparse(node)[:120]))
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id == "Reason"):
            found += [(k.value.lineno, ast.unparse(k)[:120]) for k in node.keywords if k.arg == "message" and _is_english(k.value)]
    return found


def test_the_template_sandboxs_limits_are_raised_with_reasons():
    """The prompt editor shows a sandbox limit its trial render hit: each is raised with a Reason."""
    global REFUSALS
    kept = REFUSALS
    REFUSALS = kept | {"RenderError"}
    try:
        assert english_refusals((PACKAGE / "judges" / "sandbox.py").read_text()) == []
    finally:
        REFUSALS = kept


@pytest.mark.parametrize("module", sorted(p.name for p in (PACKAGE / "loop").glob("*.py")))
def test_no_page_message_is_built_from_english_text(module):
    """The dashboard's, the disagreement list's, the compare page's and the test look's `message` is set by `say(Reason)`."""
    assert english_messages((PACKAGE / "loop" / module).read_text()) == []


def test_the_message_walk_catches_english():
    source = '''
def f(page, x):
    page.message = "plain"
    page.message = f"no {x}"
    page.message = "; ".join(x)
    page.message = str(x)
    Found(message=f"no {x}")
    page.message = ""
    page.say(Reason("compare_pick_two"))
    page.say(Reason("unexpected", message=str(x)))
'''
    assert [line for line, _ in english_messages(source)] == [3, 4, 5, 6, 7]


@pytest.mark.parametrize("module", WEB_MODULES)
def test_no_refusal_a_page_can_show_is_raised_with_english_text(module):
    path = PACKAGE / module
    assert path.exists(), module
    assert english_refusals(path.read_text()) == [], f"{module}: raise these with a Reason (calibrate/reasons.py)"


def test_the_walk_catches_every_shape_of_english_message():
    source = '''
def f(x, problem):
    raise TaskError("plain")
    raise TaskError(f"value {x}")
    raise PromptError("a " + x)
    raise RunSetupError("%s" % x)
    raise CalibrationError(str(x))
    raise SamplingError(", ".join(x))
    raise CalibrationError(x if problem else "none")
    raise EvidenceError("field", f"bad {x}")
def g(x):
    message = f"no {x}"
    raise AnnotationError(message)
def h(x, reason):
    raise TaskError(Reason("value_missing"))
    raise TaskError(reason)
    raise TaskError.carrying(x)
    raise EvidenceError("field", Reason("evidence_not_item_context", context_id=1))
    raise RenderError(f"{x} refused")
    raise ValueError(f"not a refusal {x}")
'''
    assert [line for line, _ in english_refusals(source)] == [3, 4, 5, 6, 7, 8, 9, 10, 13]


def test_the_web_views_word_refusals_instead_of_printing_them():
    """A view that catches a refusal to show it words it (views/errors.refusal_text), never `str(exc)`."""
    for path in (PACKAGE / "views").glob("*.py"):
        if path.name == "errors.py":  # refusal_text itself: the English note is its fallback for an unknown code
            continue
        if path.name == "otlp.py":  # POST /v1/traces answers exporters (google.rpc.Status), not a reader: no page, no locale
            continue
        assert "str(exc)" not in path.read_text(), path.name


def test_the_refusal_codes_word_the_same_english_line_as_before():
    """A few converted refusals, word for word what the command line printed before the codes."""
    assert str(Reason("run_no_model")) == "no model: the version has none, give --model"
    assert str(Reason("params_value_on", name="temperature", problem=Reason("param_number_range", low=0, high=1),
                      backend="anthropic", value="1.5")) == (
        "params: temperature must be a number from 0 to 1 on the anthropic backend, got 1.5")
    assert str(Reason("overlap_too_few_annotators", overlap=2, count=1, wanted="ana")) == (
        "overlap 2 needs at least 2 annotators, but 1 is named (ana)")
    assert str(Reason("assign_unknown_annotators", problems=Reason("assign_unknown_users", count=2, names="x, y"),
                      listing=Reason("assign_no_annotators"))) == (
        "cannot assign: unknown users x, y; existing annotators: none (add them with `calibrate users add NAME`)")
    assert "nothing_to_do_judged" in TEMPLATES
    # issue 21's last English: figures that were English text are reasons now, the line the same
    from calibrate.judges.runner import skipped_reason, skipped_text

    assert skipped_text({"no contexts": 3, "no answer": 1}) == (
        "skipped 4 samples with nothing to measure (no verdict): 1 no answer, 3 no contexts")
    assert str(Reason("nothing_to_measure", task="faithfulness", dataset="d", value=skipped_reason({"no claims": 2}))) == (
        "nothing to measure for faithfulness in d: skipped 2 samples with nothing to measure (no verdict): 2 no claims")
    detail = join([Reason("compare_verdict_counts_split", task="t", a="A", n_a=3, b="B", n_b=0, split="dev"),
                   Reason("compare_no_common", task="u")])
    assert str(Reason("nothing_to_compare", a="A", b="B", dataset="d", detail=detail)) == (
        "nothing to compare between A and B on d: t: A has 3 verdicts in split dev, B has 0; "
        "u: no target has human gold and a verdict from both judges")
    assert str(Reason("render_refused", part="template", refusal=Reason(
        "render_work_already", what=Reason("render_of_operator_times", operator="*", times=9), chars=12_000, spent=5,
        work=4_000_000, factor=20))) == (
        "template refused: the * operator (9 times) would build 12,000 characters; this render already built 5, and a "
        "render may build 4,000,000 (20 × PROMPT_RENDER_MAX_CHARS)")


def _spanish(reason: Reason) -> str:
    from calibrate import i18n
    from calibrate.reports.summary import reason_text

    with i18n.using("es"):
        return reason_text({"note": str(reason), "reason": reason.to_dict()})


def test_skipped_counts_and_compare_details_are_worded_whole_in_spanish():
    from calibrate.judges.runner import skipped_reason

    assert _spanish(Reason("nothing_to_measure", task="faithfulness", dataset="d",
                           value=skipped_reason({"no contexts": 3, "without two responses": 1}))) == (
        "nada que medir para faithfulness en d: se omitieron 4 muestras sin nada que medir (sin veredicto): "
        "3 sin contextos, 1 sin dos respuestas")
    detail = join([Reason("compare_verdict_counts_split", task="t", a="A", n_a=3, b="B", n_b=0, split="dev"),
                   Reason("compare_no_common", task="u")])
    assert _spanish(Reason("nothing_to_compare", a="A", b="B", dataset="d", detail=detail)) == (
        "nada que comparar entre A y B en d: t: A tiene 3 veredictos en la partición dev; B tiene 0; "
        "u: ningún elemento tiene referencia humana y un veredicto de ambos jueces")


SPANISH = {"Accept-Language": "es-ES,es;q=0.9"}


def _soup(response):
    from bs4 import BeautifulSoup

    return BeautifulSoup(response.data, "html.parser")


def test_the_team_pages_assign_refusal_is_worded_in_spanish(client, login, make_sample):
    token = login("boss", role="admin")
    make_sample(external_id="s1")
    response = client.post("/admin/assign", data={"csrf_token": token, "dataset": "d", "n": "1", "annotator": ["nadie"]},
                           headers=SPANISH, follow_redirects=True)
    shown = " ".join(f.get_text() for f in _soup(response).select(".flash")).strip()
    assert shown == ("no se puede asignar: usuario desconocido nadie; anotadores existentes: ninguno (añádalos con "
                     "`calibrate users add NOMBRE`)")
    english = client.post("/admin/assign", data={"csrf_token": token, "dataset": "d", "n": "1", "annotator": ["nadie"]},
                          headers={"Accept-Language": "en"}, follow_redirects=True)
    assert "cannot assign: unknown user nadie; existing annotators: none" in _soup(english).get_text()


def _edit_form_of_a_claims_prompt(client, login, engine, make_sample) -> dict[str, str]:
    """Save version 1 of a claim_support prompt (with a sample to judge), log in as an engineer, return its edit form."""
    make_sample(external_id="s1", claims=["Tome 0,4 mg al día."])
    return claims_prompt_edit_form(client, login, engine)


def test_the_prompt_editors_parameter_refusal_is_worded_in_spanish(client, login, engine, make_sample):
    data = _edit_form_of_a_claims_prompt(client, login, engine, make_sample)
    response = client.post("/prompts/claims/1/edit", data={**data, "params": "temperature=5"}, headers=SPANISH)
    assert response.status_code == 400
    assert _soup(response).select_one("#form-error").get_text().strip() == (
        "params: temperature debe ser un número de 0 a 2; se recibió 5")


def test_the_calibration_pages_messages_are_worded_in_spanish(demo_engine, client, login):
    """The frozen test split and the other reasons a calibration page shows nothing, on the demo (which has a test split)."""
    from calibrate.demo import DATASET

    login("eng", "engineer")
    base = f"/datasets/{DATASET}/calibration"

    def shown(url: str, selector: str, status: int = 200) -> str:
        response = client.get(url, headers=SPANISH)
        assert response.status_code == status, url
        return _soup(response).select_one(selector).get_text().strip()

    frozen = _spanish(Reason("test_split_frozen", dataset=DATASET))
    assert frozen.startswith(f"la partición de prueba de {DATASET} está congelada: ")
    assert shown(f"{base}/judges/demo-claims@1/disagreements?split=test", "#disagreement-message") == frozen
    assert shown(f"{base}/judges/demo-claims@1/disagreements?split=all", "#disagreement-message") == _spanish(
        Reason("all_samples_include_test", dataset=DATASET, splits="train, dev"))
    assert shown(f"{base}/compare?split=test&a=demo-claims@1&b=demo-claims@2", "#compare-message") == frozen
    assert shown(f"{base}/judges/demo-claims@1/alt-test?split=test", "#alt-test-message", 400) == frozen
    assert shown(f"{base}/compare?split=dev&a=demo-claims@1", "#compare-message") == (
        "elija dos jueces para comparar: A (la referencia de partida) y B")
    assert shown(f"{base}/compare?split=dev&a=demo-claims@1&b=demo-claims@1", "#compare-message") == (
        "elija dos jueces distintos: A y B son ambos demo-claims@1")
    assert shown(f"{base}/compare?split=dev&task=context_relevance&a=demo-claims@1&b=demo-claims@2", "#compare-message") == (
        f"nada que comparar entre demo-claims@1 y demo-claims@2 en {DATASET}: ni demo-claims@1 ni demo-claims@2 tienen "
        f"veredictos en {DATASET} en la partición dev")
    assert shown(f"{base}/judges/demo-claims@1/disagreements?split=dev&task=context_relevance", "#disagreement-message") == (
        f"el juez demo-claims@1 no tiene veredictos de context_relevance en {DATASET} en la partición dev")
    # the same pages in English: the messages word for word as before the codes
    english = _soup(client.get(f"{base}/compare?split=dev&a=demo-claims@1", headers={"Accept-Language": "en"}))
    assert english.select_one("#compare-message").get_text().strip() == "pick two judges to compare: A (the baseline) and B"


def test_a_bad_number_in_a_query_is_refused_in_spanish(demo_engine, client, login):
    from calibrate.demo import DATASET

    login("eng", "engineer")
    page = client.get(f"/datasets/{DATASET}?page=abc", headers=SPANISH)
    assert page.status_code == 400
    assert "page debe ser un número entero de 1 a 1.000.000.000; se recibió 'abc'" in _soup(page).get_text()
    script = client.get(f"/datasets/{DATASET}?page=abc", headers={**SPANISH, "HX-Request": "true"})
    assert script.status_code == 400 and script.headers["X-Invalid-Field"] == "page"
    assert script.get_data(as_text=True) == "page debe ser un número entero de 1 a 1.000.000.000; se recibió 'abc'"
    english = client.get(f"/datasets/{DATASET}?page=abc", headers={"Accept-Language": "en", "HX-Request": "true"})
    assert english.get_data(as_text=True) == "page must be a whole number from 1 to 1,000,000,000, got 'abc'"


def test_the_prompt_editors_sandbox_limit_is_worded_in_spanish(client, login, engine, make_sample):
    data = _edit_form_of_a_claims_prompt(client, login, engine, make_sample)
    data["template"] = "{{ claim }}{% for i in range(100000000) %}{% endfor %}"
    response = client.post("/prompts/claims/1/edit", data=data, headers=SPANISH)
    assert response.status_code == 400
    assert _soup(response).select_one("#form-error").get_text().strip() == (
        "template rechazado: range() de 100.000.000 números; una plantilla puede pedir como máximo 10.000")
