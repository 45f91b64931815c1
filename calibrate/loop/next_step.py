"""The dashboard's "what next" line: one step per task, derived from the state the dashboard shows (docs/loop.md).

The lead judge is the passing judge with the highest alignment, else the judge with the highest
alignment. Then, in this order:

1. no judge has run on the split: run one;
2. the lead's decision is undecided and more labels are expected to settle it: label N more (N: the
   decision's `labels_to_decide`, else the label budget's count for the CI half-width goal);
3. disagreements of the lead not triaged yet (and it has not passed): triage K disagreements;
4. the lead failed and everything is triaged: improve the prompt (few-shot examples, the guideline) and run a new version;
5. the lead passed, the dataset has a test split, and the lead has never been evaluated on it: evaluate on test;
6. otherwise: done (passed, evaluated on test when there is one).

Pure: it reads a calibrate.loop.dashboard.Dashboard, no database.
"""

from __future__ import annotations

from dataclasses import dataclass

from calibrate import i18n


@dataclass(frozen=True)
class NextStep:
    kind: str  # run | label | triage | improve | test | done
    judge: str | None = None
    n: int = 0

    def text(self) -> str:
        """Return the step in one sentence, in the current locale."""
        gettext, ngettext = i18n.gettext, i18n.ngettext
        if self.kind == "run":
            return gettext("Next: run a judge on this split (a prompt version, or import a judge's verdicts).")
        if self.kind == "label":
            return ngettext("Next: label %(num)s more target to decide whether %(judge)s passes.",
                            "Next: label %(num)s more targets to decide whether %(judge)s passes.", self.n, judge=self.judge)
        if self.kind == "triage":
            return ngettext("Next: triage %(num)s disagreement of %(judge)s.", "Next: triage %(num)s disagreements of %(judge)s.",
                            self.n, judge=self.judge)
        if self.kind == "improve":
            return gettext("Next: %(judge)s fails; improve the prompt (few-shot examples, the guideline) and run a new version.",
                           judge=self.judge)
        if self.kind == "test":
            return gettext("Next: %(judge)s passes on this split; evaluate it on test.", judge=self.judge)
        return gettext("Done: %(judge)s passes.", judge=self.judge)


def next_step(board) -> NextStep | None:
    """Return the next step for the dashboard's task, or None when the dashboard has nothing to show (a message)."""
    if board.message and not board.rows:
        return NextStep("run") if board.n_labelled else None
    ran = [r for r in board.rows if r.ran]
    if not ran:
        return NextStep("run")
    scored = sorted(ran, key=lambda r: (r.decision == "pass", r.value if r.value is not None else float("-inf")), reverse=True)
    lead = scored[0]
    # How many more labelled targets would settle an undecided lead (calibration/decision.py), else the label budget's
    # count for the CI half-width goal; none when more labels are not expected to settle it.
    settle = lead.labels_to_decide
    more = int((settle if settle is not None else (lead.budget or {})).get("more_targets") or 0)
    if lead.decision in (None, "undecided") and more > 0:
        return NextStep("label", lead.judge, more)
    untriaged = max((lead.n_disagree or 0) - sum(lead.triage.values()), 0)
    if lead.decision != "pass" and untriaged:
        return NextStep("triage", lead.judge, untriaged)
    if lead.decision != "pass":
        return NextStep("improve", lead.judge)
    if board.has_test and lead.test is None:
        return NextStep("test", lead.judge)
    return NextStep("done", lead.judge)
