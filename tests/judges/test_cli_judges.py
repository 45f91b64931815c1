"""`calibrate prompt …` and `calibrate judge run` through the CLI."""

from __future__ import annotations

from sqlmodel import select

from calibrate.models import PromptVersion, Verdict


def test_prompt_new_list_show_diff(runner, tmp_path, make_sample):
    make_sample(external_id="s1", claims=["Tome 0,4 mg al día."])
    result = runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--model", "m1", "--param", "temperature=0"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "claims@1"
    assert runner.invoke(["prompt", "new", "claims", "--model", "m1"]).output.strip() == "claims@1 (unchanged: identical to version 1)"
    template = tmp_path / "t.j2"
    template.write_text("Question: {{ question }}\nClaim: {{ claim.text }}\n")
    result = runner.invoke(["prompt", "new", "claims", "--template", str(template), "--param", "max_tokens=200", "--note", "short"])
    assert result.output.strip() == "claims@2"
    listing = runner.invoke(["prompt", "list"]).output
    assert listing.startswith("claims\tclaim_support\t2 versions\tlatest claims@2\t0 runs")
    shown = runner.invoke(["prompt", "show", "claims@2"]).output
    assert "note: short" in shown and "max_tokens=200" in shown and "temperature=0" in shown and "Claim: {{ claim.text }}" in shown
    diff = runner.invoke(["prompt", "diff", "claims@1", "claims@2"]).output
    assert "+Claim: {{ claim.text }}" in diff and "+max_tokens=200" in diff


def test_prompt_new_refuses_an_unknown_field_naming_it(runner, tmp_path, session):
    template = tmp_path / "t.j2"
    template.write_text("{{ question }} {{ claim.txet }}")
    result = runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--template", str(template)])
    assert result.exit_code == 2 and "claim.txet" in result.output and result.output.startswith("error:")
    assert session.exec(select(PromptVersion)).all() == []


def test_judge_run_with_the_baseline(runner, make_sample, session):
    make_sample(external_id="s1", answer="Tome 0,4 mg al día. Tome 4 mg al día.", contexts=("Tome 0,4 mg al día de ácido fólico.",),
                claims=["Tome 0,4 mg al día.", "Tome 4 mg al día."])
    runner.invoke(["prompt", "new", "claims", "--task", "claim_support"])
    result = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@1"])
    assert result.exit_code == 0, result.output
    assert "claims@1: run 1 done — 2/2 targets judged (2 verdicts, 0 unparsed, 0 errors" in result.output
    assert sorted(session.exec(select(Verdict.value)).all()) == ["supported", "unsupported"]
    again = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@1"])
    assert again.exit_code == 0 and "nothing to do" in again.output


def test_judge_run_fails_fast_with_one_line(runner, make_sample, monkeypatch):
    make_sample(external_id="s1")
    runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--model", "m"])
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    result = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@1", "--backend", "openai",
                            "--api-key-env", "NO_SUCH_KEY"])
    assert result.exit_code == 2 and result.output.strip() == \
        "error: the environment variable NO_SUCH_KEY (--api-key-env) is not set or empty"
    result = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@9"])
    assert result.exit_code == 2 and "no version 9" in result.output
    result = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@1", "--backend", "openai",
                            "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", ""])
    assert result.exit_code == 2 and "cannot reach http://127.0.0.1:9/v1/chat/completions" in result.output


def test_ctrl_c_says_what_was_saved_and_that_rerunning_continues(runner, make_sample, session, monkeypatch):
    from calibrate.cli import judges as cli_judges
    from calibrate.judges import execute_run

    for i in range(60):
        make_sample(external_id=f"s{i}", answer="Tome 0,4 mg al día.", claims=["Tome 0,4 mg al día."])
    runner.invoke(["prompt", "new", "claims", "--task", "claim_support"])

    def interrupted(engine, run_id, **kwargs):
        def progress(done, total):
            if done >= 50:  # the first batch is committed: Ctrl+C now
                raise KeyboardInterrupt
        return execute_run(engine, run_id, **{**kwargs, "progress": progress})

    monkeypatch.setattr(cli_judges.judges, "execute_run", interrupted)
    result = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@1"])
    assert result.exit_code == 1
    assert "Aborted!" not in result.output
    saved = len(session.exec(select(Verdict)).all())
    assert 0 < saved < 60
    assert result.output.strip() == (
        f"interrupted: run 1 stopped with {saved} of 60 targets judged and saved; run `calibrate judge run --dataset d "
        "--prompt claims@1` again to continue (answered calls come from the cache, nothing is judged twice)")
    monkeypatch.undo()
    again = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@1"])
    assert again.exit_code == 0 and f"60/60 targets judged ({60 - saved} verdicts" in again.output
