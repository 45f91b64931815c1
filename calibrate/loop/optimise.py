"""`calibrate optimise`: propose judge versions from the train split, select on dev with a bound that knows how many
versions were looked at, confirm on test once (docs/loop.md, "Optimise"; docs/statistics.md §19).

    prepare_optimisation(engine, spec)   every refusal, nothing called; creates the optimisation (or takes up the
                                         one the same command started: same settings, not finished)
    execute_optimisation(engine, id)     rounds until a stop; the result is stored and returned (`result`)
    optimise(engine, spec)               both, for the CLI and the benchmarks

A round: the parent (the start, then the best candidate so far) is run on the train split's
labelled targets; from its train verdicts (`proposals.py`) come a few-shot candidate (examples
added, the oldest dropped past MAX_SHOTS), a rewrite candidate (the rewriter's new instructions,
`judges/rewrite.py`; refused with its reason when it changes the template's constructs or reply
format) and both together. Each candidate is an immutable prompt version with its parent, a note
and its origin (`PromptVersion.optimisation_id`), run on dev's labelled targets through the
runner (cache, resume, budgets). Every candidate with a finished dev run is scored on their
common targets, misses counted (`calibration.score_candidates`: the dashboard's rule), with
`lower_adjusted` for the looks on dev (`testsplit.version_looks`). Stops, in this order:
`target_reached` (the best lower_adjusted ≥ target), `budget`, `cannot_reach` (a round without
gain while the best upper bound is below the target), `no_improvement` (`patience` rounds
without gain), `max_candidates`; before anything, `ceiling_below_target`. On `target_reached` the
chosen version is scored once on test (`testsplit.evaluate_on_test`, one recorded look) and that
decision is the optimisation's.

Resuming: the state (candidates, the runs and their calls before, the rewrite calls, the stop) is
written as it goes, in short transactions of its own like a judge run's writer; the same command
after a kill finds the optimisation by its settings' digest, reuses the versions made (the content
hash) and the runs (verdicts stored, answers cached), so it repeats at most the calls in flight.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlmodel import Session, func, select

from calibrate import lookup
from calibrate.calibration import Options, calibrated_task, human_agreement, score_candidates
from calibrate.db import write_session
from calibrate.errors import CalibrationError
from calibrate.judges import NothingToDo, RunOptions, RunSpec, execute_run, prepare_run, resolve_version
from calibrate.judges.errors import JudgeError
from calibrate.judges.execution import Totals, owner_fields
from calibrate.judges.prices import Price, load_prices, price_for
from calibrate.judges.rewrite import Answer, ask_rewrites, check_rewrite, default_rewriter
from calibrate.judges.runner import DEAD_RUN_ERROR, endpoint_for, request_stop, run_is_live
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits
from calibrate.judges.versions import FewShotSpec, example_view, judge_name, save_version, stored_examples
from calibrate.loop.proposals import TrainItem, choose_examples, rewrite_batch, train_pool
from calibrate.loop.testsplit import TEST_SPLIT, evaluate_on_test, version_looks
from calibrate.models import (
    Dataset,
    Judge,
    JudgeRun,
    Label,
    Optimisation,
    Prompt,
    PromptVersion,
    Sample,
    Task,
    TestEvaluation,
    utcnow,
)
from calibrate.reasons import Reason
from calibrate.stats import ADJUSTMENTS
from calibrate.task_values import is_rewrite
from calibrate.tasks import METRIC_TASKS

STRATEGIES = ("fewshot", "rewrite")
STOP_CODES = ("target_reached", "budget", "max_candidates", "no_improvement", "cannot_reach", "ceiling_below_target",
              "cancelled")
MAX_SHOTS = 8  # few-shot examples of a candidate, at most (the oldest go first)
SHOTS_PER_ROUND = 4
REWRITE_BATCH = 8  # disagreements shown in one rewrite request


@dataclass
class OptimiseSpec:
    """What `calibrate optimise` and the dashboard's Optimise form ask for (the key is only named, never held)."""

    dataset: str
    task: str
    start: str  # NAME@V
    backend: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    samples: int = 1
    orders: str | None = None
    target: float = 0.75
    max_candidates: int = 12
    max_calls: int | None = None
    max_cost: float | None = None
    patience: int = 2
    strategies: tuple[str, ...] = STRATEGIES
    seed: int = 0
    reuse_test: bool = False
    rewriter: str | None = None  # NAME@V of an instruction_rewrite prompt (default: instruction-rewrite, made on first use)
    adjustment: str = "max_statistic"
    timeout: float = 120.0
    max_attempts: int = 5
    # Scoring: the app's or the command's settings (BOOTSTRAP, CONFIDENCE, SEED), so dev values are the dashboard's.
    bootstrap: int = 2000
    confidence: float = 0.95
    score_seed: int = 0

    def identity(self) -> dict[str, Any]:
        """Return what makes two requests the same optimisation (budgets, concurrency and timeouts may change)."""
        keep = ("dataset", "task", "start", "backend", "model", "base_url", "samples", "orders", "target", "max_candidates",
                "patience", "strategies", "seed", "rewriter", "adjustment", "bootstrap", "confidence", "score_seed")
        data = asdict(self)
        return {name: list(data[name]) if name == "strategies" else data[name] for name in keep}

    def key(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- refusals and setup


def _refuse(code: str, **figures: Any) -> None:
    """Raise the refusal `code` (a CalibrationError: exit 2, nothing called)."""
    raise CalibrationError(Reason(code, **figures))


def _split_counts(session: Session, dataset_id: int, task: Task) -> dict[str, tuple[int, int]]:
    """Return split → (samples, targets with a current label of the task)."""
    samples = dict(session.exec(select(Sample.split, func.count()).where(Sample.dataset_id == dataset_id,
                                                                         Sample.split.is_not(None)).group_by(Sample.split)).all())
    labelled = dict(session.exec(select(Sample.split, func.count(func.distinct(Label.target_key)))
                                 .join(Sample, Sample.id == Label.sample_id)
                                 .where(Sample.dataset_id == dataset_id, Label.task_id == task.id, Label.stale.is_(False))
                                 .group_by(Sample.split)).all())
    return {split: (n, int(labelled.get(split, 0))) for split, n in samples.items()}


def check_spec(session: Session, spec: OptimiseSpec, prices: dict[str, Price]) -> dict[str, Any]:
    """Raise CalibrationError (or NotFound) for every refusal; return what the checks found (ids, splits)."""
    dataset = lookup.dataset(session, spec.dataset)
    task = lookup.task(session, spec.task)
    if task.name in METRIC_TASKS:
        _refuse("optimise_metric_task", task=task.name)
    task = calibrated_task(session, task.name)  # refuses the extraction and the rewrite
    prompt, version = resolve_version(session, spec.start)
    if prompt.task_id != task.id:
        _refuse("optimise_other_task", start=spec.start, task=session.get(Task, prompt.task_id).name, task2=task.name)
    if not (isinstance(spec.target, (int, float)) and 0 < spec.target <= 1):
        _refuse("optimise_target_range", target=spec.target)
    if spec.backend == "baseline":
        _refuse("optimise_baseline")
    unknown = [s for s in spec.strategies if s not in STRATEGIES]
    if unknown or not spec.strategies:
        _refuse("optimise_strategies", given=",".join(spec.strategies) or "—", strategies=",".join(STRATEGIES))
    if spec.adjustment not in ADJUSTMENTS:
        _refuse("optimise_adjustment", given=spec.adjustment, adjustments=", ".join(ADJUSTMENTS))
    if spec.max_candidates < 2 or spec.patience < 1:
        _refuse("optimise_bounds", max_candidates=spec.max_candidates, patience=spec.patience)
    splits = _split_counts(session, dataset.id, task)
    if "dev" not in splits:
        _refuse("optimise_no_dev", dataset=dataset.name)
    if splits.get("train", (0, 0))[1] == 0:
        _refuse("optimise_no_train_gold", dataset=dataset.name, task=task.name)
    if splits["dev"][1] == 0:
        _refuse("optimise_no_dev_gold", dataset=dataset.name, task=task.name)
    endpoint = endpoint_for(RunSpec(dataset=dataset.name, prompt=spec.start, backend=spec.backend, model=spec.model,
                                    base_url=spec.base_url, api_key_env=spec.api_key_env), version)
    if spec.max_cost is not None and price_for(prices, endpoint.model) is None:
        _refuse("optimise_cost_unpriced", model=endpoint.model)
    rewriter = None
    if "rewrite" in spec.strategies and spec.rewriter:
        rewrite_prompt, rewriter = resolve_version(session, spec.rewriter)
        if not is_rewrite(session.get(Task, rewrite_prompt.task_id)):
            _refuse("optimise_rewriter_task", rewriter=spec.rewriter)
    return {"dataset": dataset, "task": task, "prompt": prompt, "version": version, "splits": splits, "endpoint": endpoint,
            "rewriter": rewriter}


def optimisation_is_live(session: Session, opt: Optimisation) -> bool:
    """Return whether a running optimisation still has a process behind it: its owner's pid on this host, else a
    heartbeat younger than a run's LIVE_SECONDS or one of its runs live (a long run writes no state)."""
    if opt.status != "running":
        return False
    state = opt.state or {}
    owner = state.get("owner") or {}
    if owner.get("host") == socket.gethostname() and owner.get("pid"):
        try:
            os.kill(int(owner["pid"]), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if run_is_live(SimpleNamespace(status="running", params=owner)):
        return True
    runs = [session.get(JudgeRun, int(run_id)) for run_id in state.get("runs") or {}]
    return any(run is not None and run_is_live(run) for run in runs)


def _test_looks(session: Session, dataset_id: int, task_id: int) -> list[TestEvaluation]:
    return list(session.exec(select(TestEvaluation).where(TestEvaluation.dataset_id == dataset_id,
                                                          TestEvaluation.task_id == task_id).order_by(TestEvaluation.id)).all())


def prepare_optimisation(engine: Engine, spec: OptimiseSpec, *, prices: dict[str, Price] | None = None, user=None) -> int:
    """Check the request (refusals: exit 2, nothing called); create the optimisation or take up the same one; return its id."""
    prices = load_prices() if prices is None else prices
    key = spec.key()
    with write_session(engine) as session:
        found = check_spec(session, spec, prices)
        same = session.exec(select(Optimisation).where(Optimisation.key == key).order_by(Optimisation.id.desc())).first()
        if same is not None and same.status == "running" and optimisation_is_live(session, same):
            _refuse("optimise_in_progress", id=same.id)
        looks = _test_looks(session, found["dataset"].id, found["task"].id)
        own_look = ((same.state or {}).get("test") or {}).get("evaluation_id") if same is not None else None
        has_test = found["splits"].get(TEST_SPLIT, (0, 0))[0] > 0
        if has_test and looks and not spec.reuse_test and own_look not in {row.id for row in looks}:
            _refuse("optimise_test_looked", dataset=found["dataset"].name, task=found["task"].name, count=len(looks))
        if "rewrite" in spec.strategies and found["rewriter"] is None:
            rewrite_prompt, rewriter = default_rewriter(session)
            spec.rewriter = spec.rewriter or f"{rewrite_prompt.name}@{rewriter.number}"
        settings = {**asdict(spec), "strategies": list(spec.strategies), "key": key}
        if same is not None and not (same.status == "done" and (same.result or {}).get("stop", {}).get("code") != "budget"):
            same.settings, same.status, same.error, same.finished_at = settings, "running", "", None
            same.state = {**(same.state or {}), "owner": owner_fields(), "cancel": False}
            session.add(same)
            session.flush()
            return same.id
        if same is not None:  # finished: the same command shows its result again
            return same.id
        opt = Optimisation(dataset_id=found["dataset"].id, task_id=found["task"].id, key=key, status="running",
                           settings=settings, state={"owner": owner_fields(), "candidates": [], "refused": [], "runs": {},
                                                     "rewrite": {"calls": 0, "cost": 0.0}, "round": 0, "gains": {}},
                           user_id=user.id if user is not None else None)
        session.add(opt)
        session.flush()
        return opt.id


# --------------------------------------------------------------------------- the optimisation's progress


class Stop(Exception):
    """Raised inside a round to end the optimisation with a stop code (its figures in `stop`)."""

    def __init__(self, code: str, **figures: Any) -> None:
        super().__init__(code)
        self.stop = {"code": code, **figures}


@dataclass
class Optimiser:
    """One attempt at an optimisation: its settings, its stored state, and how it calls (tests pass a transport)."""

    engine: Engine
    opt_id: int
    spec: OptimiseSpec
    state: dict[str, Any]
    dataset: str
    task_name: str
    transport: httpx.AsyncBaseTransport | None = None
    prices: dict[str, Price] = field(default_factory=dict)
    limits: Limits = DEFAULT_LIMITS
    progress: Callable[[str], object] | None = None

    # ---- state
    def save(self, **changes: Any) -> None:
        """Write the state (and `changes` to the row) in a short transaction; raise Stop when cancel was asked."""
        with write_session(self.engine) as session:
            opt = session.get(Optimisation, self.opt_id)
            stored = dict(opt.state or {})
            self.state["cancel"] = bool(stored.get("cancel"))
            self.state["owner"] = owner_fields()
            opt.state = json.loads(json.dumps(self.state))
            for name, value in changes.items():
                setattr(opt, name, value)
            session.add(opt)
        if self.state["cancel"] and not changes:
            raise Stop("cancelled")

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    # ---- budget
    def spent(self) -> tuple[int, float]:
        """Return the calls and cost this optimisation made: its runs' calls since it started them, and its rewrites."""
        calls, cost = int(self.state["rewrite"]["calls"]), float(self.state["rewrite"]["cost"])
        with Session(self.engine) as session:
            for run_id, before in self.state["runs"].items():
                run = session.get(JudgeRun, int(run_id))
                if run is not None:
                    calls += int((run.params or {}).get("calls", 0)) - int(before["calls"])
                    cost += float(run.cost or 0.0) - float(before["cost"])
        return calls, cost

    def budget_left(self) -> tuple[int | None, float | None]:
        """Return the calls and cost left (None: no budget); raise Stop("budget") when one is spent."""
        calls, cost = self.spent()
        left_calls = None if self.spec.max_calls is None else self.spec.max_calls - calls
        left_cost = None if self.spec.max_cost is None else self.spec.max_cost - cost
        if (left_calls is not None and left_calls <= 0) or (left_cost is not None and left_cost <= 0):
            raise Stop("budget", calls=calls, cost=round(cost, 6), max_calls=self.spec.max_calls, max_cost=self.spec.max_cost)
        return left_calls, left_cost

    def run_options(self) -> RunOptions:
        left_calls, left_cost = self.budget_left()
        return RunOptions(concurrency=self.spec.concurrency, max_calls=left_calls, max_cost=left_cost,
                          read_timeout=self.spec.timeout, max_attempts=self.spec.max_attempts)

    # ---- runs
    def run(self, ref: str, split: str) -> list[int]:
        """Run a version on a split's labelled targets (resumed, never repeated); return the run ids it used."""
        spec = RunSpec(dataset=self.dataset, prompt=ref, backend=self.spec.backend, model=self.spec.model,
                       base_url=self.spec.base_url, api_key_env=self.spec.api_key_env, split=split, labelled_only=True,
                       samples=self.spec.samples, orders=self.spec.orders, options=self.run_options())
        try:
            run_id = prepare_run(self.engine, spec)
        except NothingToDo:
            return []
        with Session(self.engine) as session:
            run = session.get(JudgeRun, run_id)
            self.state["runs"].setdefault(str(run_id), {"calls": int((run.params or {}).get("calls", 0)), "cost": float(run.cost)})
        self.save()
        summary = execute_run(self.engine, run_id, transport=self.transport, prices=self.prices, limits=self.limits,
                              seed=self.spec.seed)
        self.save()
        if summary.status == "failed":
            raise JudgeError(summary.error)
        if summary.status == "stopped":
            if "budget" in summary.error:
                self.budget_left()
                calls, cost = self.spent()
                raise Stop("budget", calls=calls, cost=round(cost, 6), max_calls=self.spec.max_calls, max_cost=self.spec.max_cost)
            raise Stop("cancelled")
        return [run_id]

    # ---- candidates
    def candidate(self, ref: str) -> dict | None:
        return next((c for c in self.state["candidates"] if c["version"] == ref), None)

    def add_candidate(self, version: PromptVersion, prompt: Prompt, parent: str | None, change: dict, *, calls: int = 0,
                      cost: float = 0.0) -> dict | None:
        ref = judge_name(prompt, version)
        if self.candidate(ref) is not None:
            return None  # the same content as a candidate already listed: not a new look
        entry = {"version": ref, "version_id": version.id, "parent": parent, "round": self.state["round"], "change": change,
                 "runs": [], "rewrite_calls": calls, "rewrite_cost": cost, "scored": False}
        self.state["candidates"].append(entry)
        self.save()
        return entry

    def n_proposed(self) -> int:
        return len(self.state["candidates"]) + len(self.state["refused"])


def _change(kind: str, shots: list[str], added: list[str], removed: list[str], note: str) -> dict:
    return {"kind": kind, "few_shots": shots, "added": added, "removed": removed, "note": note}


def _shot_refs(session: Session, version: PromptVersion) -> list[tuple[str, str]]:
    """Return a version's few-shot examples as (target key, SAMPLE[:N] reference), in order."""
    return [(row.target_key, example_view(session, order, row).ref) for order, row in enumerate(stored_examples(session, version))]


# --------------------------------------------------------------------------- rounds


def execute_optimisation(engine: Engine, opt_id: int, *, transport: httpx.AsyncBaseTransport | None = None,
                         prices: dict[str, Price] | None = None, limits: Limits = DEFAULT_LIMITS,
                         progress: Callable[[str], object] | None = None) -> dict:
    """Optimise until a stop; store and return the result (`result_dict`). A backend that refuses for good (bad key,
    unknown model, unreachable) fails the optimisation (JudgeError raised after it is recorded)."""
    with Session(engine) as session:
        opt = session.get(Optimisation, opt_id)
        if opt.status == "done" and opt.result is not None:
            return opt.result
        settings = {k: v for k, v in opt.settings.items() if k != "key"}
        spec = OptimiseSpec(**{**settings, "strategies": tuple(settings["strategies"])})
        dataset = session.get(Dataset, opt.dataset_id).name
        state = dict(opt.state or {})
    state.setdefault("candidates", [])
    state.setdefault("refused", [])
    state.setdefault("runs", {})
    state.setdefault("rewrite", {"calls": 0, "cost": 0.0})
    state.setdefault("gains", {})
    state.pop("stop", None)
    optimiser = Optimiser(engine, opt_id, spec, state, dataset, spec.task, transport=transport,
                          prices=load_prices() if prices is None else prices, limits=limits, progress=progress)
    status, error = "done", ""
    try:
        _rounds(optimiser)
    except Stop as stop:
        state["stop"] = stop.stop
    except JudgeError as exc:
        status, error = "failed", str(exc)
        state["stop"] = {"code": "failed", "error": error}
    except BaseException as exc:  # recorded, then raised: a page must never poll an optimisation nobody runs
        status, error = "failed", f"{type(exc).__name__}: {exc}"[:2000]
        state["stop"] = {"code": "failed", "error": error}
        _finish(engine, opt_id, state, status, error)
        raise
    result = _finish(engine, opt_id, state, status, error)
    if status == "failed":
        raise JudgeError(error)
    return result


def _finish(engine: Engine, opt_id: int, state: dict, status: str, error: str) -> dict:
    """Store the final state, the result and the status; return the result."""
    if state.get("stop", {}).get("code") == "cancelled":
        status = "cancelled"
    with write_session(engine) as session:
        opt = session.get(Optimisation, opt_id)
        state["owner"] = owner_fields()
        state["cancel"] = bool((opt.state or {}).get("cancel"))
        opt.state = json.loads(json.dumps(state))
        opt.status, opt.error, opt.finished_at = status, error, utcnow()  # before the result, which says the status
        session.add(opt)
        session.flush()
        result = result_dict(session, opt)
        opt.result = result
        session.add(opt)
    return result


def _scoring_options(spec: OptimiseSpec, split: str) -> Options:
    return Options(split=split, threshold=spec.target, bootstrap=spec.bootstrap, confidence=spec.confidence,
                   seed=spec.score_seed, order_rule="consistent")


def _ceiling_check(optimiser: Optimiser) -> None:
    """Stop with `ceiling_below_target` when the experts' agreement on dev is shown to be below the target."""
    spec = optimiser.spec
    with Session(optimiser.engine) as session:
        human = human_agreement(session, optimiser.dataset, spec.task, split="dev", options=_scoring_options(spec, "dev"))
    block = ((human or {}).get("human") or {}).get("ceiling") or {}
    ci = block.get("ci")
    optimiser.state["ceiling"] = {"metric": block.get("metric"), "value": block.get("value"), "ci": ci}
    if ci and ci[1] is not None and ci[1] < spec.target:
        raise Stop("ceiling_below_target", ceiling=block.get("value"), upper=ci[1], metric=block.get("metric"))


def _rounds(optimiser: Optimiser) -> None:
    spec, state = optimiser.spec, optimiser.state
    if not state["candidates"]:
        _ceiling_check(optimiser)
        with Session(optimiser.engine) as session:
            prompt, version = resolve_version(session, spec.start)
            shots = [ref for _, ref in _shot_refs(session, version)]
        optimiser.add_candidate(version, prompt, None, _change("start", shots, [], [], f"the version optimised from ({spec.start})"))
    while True:
        for entry in state["candidates"]:
            if not entry["scored"]:
                entry["runs"] += optimiser.run(entry["version"], "dev")
                entry["scored"] = True
                optimiser.save()
        best, gained = _score(optimiser)
        if state.get("test") is None and best is not None and best["dev"]["lower_adjusted"] is not None \
                and best["dev"]["lower_adjusted"] >= spec.target:
            state["chosen"] = best["version"]
            _confirm_on_test(optimiser, best)
            raise Stop("target_reached", version=best["version"], lower_adjusted=best["dev"]["lower_adjusted"],
                       target=spec.target)
        if state.get("test") is not None:  # resumed after the look: the look is the decision
            raise Stop("target_reached", version=state["chosen"], target=spec.target)
        if state["round"] > state.get("proposed", 0):  # resumed inside a round: finish its proposals first
            _propose(optimiser, best or state["candidates"][0])
            continue
        if state["round"] > 0:
            gains = state["gains"]
            gains.setdefault(str(state["round"]), gained)  # a resumed round keeps what it found the first time
            gained = gains[str(state["round"])]
            upper = (best or {}).get("dev", {}).get("ci") or [None, None]
            if not gained and upper[1] is not None and upper[1] < spec.target:
                raise Stop("cannot_reach", version=best["version"], upper=upper[1], target=spec.target)
            last = [gains[str(r)] for r in range(state["round"] - spec.patience + 1, state["round"] + 1) if str(r) in gains]
            if len(last) == spec.patience and not any(last):
                raise Stop("no_improvement", rounds=spec.patience)
        if optimiser.n_proposed() >= spec.max_candidates:
            raise Stop("max_candidates", max_candidates=spec.max_candidates)
        state["round"] += 1
        state["parent"] = (best or state["candidates"][0])["version"]
        optimiser.save()
        _propose(optimiser, best or state["candidates"][0])


def _score(optimiser: Optimiser) -> tuple[dict | None, bool]:
    """Score every candidate run on dev; set each one's `dev`; return the best and whether it beat the best before."""
    spec, state = optimiser.spec, optimiser.state
    names = [c["version"] for c in state["candidates"] if c["scored"]]
    with Session(optimiser.engine) as session:
        dataset, task = lookup.dataset(session, optimiser.dataset), lookup.task(session, spec.task)
        looks = version_looks(session, dataset, task, "dev")
        scored = score_candidates(session, dataset.name, task.name, names, looks=looks, options=_scoring_options(spec, "dev"),
                                  adjustment=spec.adjustment)
    state["looks_dev"] = scored.looks
    state["level"] = scored.level
    for entry in state["candidates"]:
        section = scored.scores.common.get(entry["version"]) or {}
        alignment = section.get("alignment") or {}
        entry["dev"] = {"value": alignment.get("value"), "ci": alignment.get("ci"), "n": section.get("n"),
                        "lower_adjusted": scored.lower_adjusted.get(entry["version"]), "metric": alignment.get("metric"),
                        "n_unparsed": section.get("n_unparsed")}
    ranked = [c for c in state["candidates"] if c.get("dev", {}).get("value") is not None]
    if not ranked:
        optimiser.save()
        return None, False

    def order(c: dict) -> tuple:
        low = c["dev"]["lower_adjusted"]
        return (low if low is not None else float("-inf"), c["dev"]["value"])

    best = max(ranked, key=order)  # the first of equals: max keeps the earliest
    previous = state.get("best_lower")
    low = best["dev"]["lower_adjusted"]
    gained = low is not None and (previous is None or low > previous)
    state["best_lower"] = max(low, previous) if (low is not None and previous is not None) else (low if low is not None else previous)
    state["best"] = best["version"]
    optimiser.save()
    optimiser.say(f"round {state['round']}: {len(ranked)} candidates scored on dev, {scored.looks} looks; best "
                  f"{best['version']} {best['dev']['value']:.3f}, lower_adjusted "
                  + ("—" if low is None else f"{low:.3f}"))
    return best, gained


def _propose(optimiser: Optimiser, best: dict) -> None:
    """Make this round's candidates from the parent's train verdicts (train items only); the parent is the best
    candidate when the round began (kept in the state, so a resumed round derives from the same one)."""
    spec, state = optimiser.spec, optimiser.state
    parent = optimiser.candidate(state.get("parent") or best["version"]) or best
    optimiser.run(parent["version"], "train")
    rng = random.Random(f"{spec.seed}:{state['round']}:{parent['version']}")
    with Session(optimiser.engine) as session:
        prompt, version = resolve_version(session, parent["version"])
        task = lookup.task(session, spec.task)
        pool = train_pool(session, optimiser.dataset, spec.task, parent["version"], _scoring_options(spec, "train"))
        shown = _shot_refs(session, version)
        shown_keys = {key for key, _ in shown}
        texts = [item.text for item in pool if item.target in shown_keys]
        examples = choose_examples(pool, shown_keys, texts, k=SHOTS_PER_ROUND, rng=rng) if "fewshot" in spec.strategies else []
        judge = session.exec(select(Judge).where(Judge.name == parent["version"])).first()
        batch = rewrite_batch(session, task, judge, pool, size=REWRITE_BATCH, rng=rng) \
            if "rewrite" in spec.strategies and judge is not None else []
    new_shots = None
    if examples:
        new_shots = _with_examples([ref for _, ref in shown], examples)
    instructions, calls, cost = None, 0, 0.0
    if batch and optimiser.n_proposed() + (new_shots is not None) < spec.max_candidates:
        instructions, calls, cost = _rewrite(optimiser, version, task, batch, parent)
    if new_shots is not None and optimiser.n_proposed() < spec.max_candidates:
        refs, added, removed = new_shots
        note = (f"few-shot examples {', '.join(added)} added from the train split (disagreements of {parent['version']} first)"
                + (f"; {', '.join(removed)} removed (at most {MAX_SHOTS})" if removed else ""))
        _save_candidate(optimiser, prompt, version, parent, _change("fewshot", refs, added, removed, note), shots=refs)
    if instructions is not None:
        note = f"instructions rewritten by {spec.rewriter} from {len(batch)} train disagreements of {parent['version']}"
        _save_candidate(optimiser, prompt, version, parent, _change("rewrite", [ref for _, ref in shown], [], [], note),
                        system=instructions, calls=calls, cost=cost)
        if new_shots is not None and optimiser.n_proposed() < spec.max_candidates:
            refs, added, removed = new_shots
            _save_candidate(optimiser, prompt, version, parent,
                            _change("fewshot+rewrite", refs, added, removed, f"both changes: {', '.join(added)} added; "
                                    f"instructions rewritten by {spec.rewriter}"), shots=refs, system=instructions)
    state["proposed"] = state["round"]
    optimiser.save()


def _with_examples(refs: list[str], examples: list[TrainItem]) -> tuple[list[str], list[str], list[str]]:
    """Return the few-shot references after adding `examples` (the oldest dropped past MAX_SHOTS), and what changed."""
    added = [item.ref for item in examples]
    together = refs + added
    removed = together[:max(0, len(together) - MAX_SHOTS)]
    return together[len(removed):], added, removed


def _save_candidate(optimiser: Optimiser, prompt: Prompt, parent_version: PromptVersion, parent: dict, change: dict, *,
                    shots: list[str] | None = None, system: str | None = None, calls: int = 0, cost: float = 0.0) -> None:
    with write_session(optimiser.engine) as session:
        base = session.get(PromptVersion, parent_version.id)
        result = save_version(session, prompt.name, few_shots=[FewShotSpec(ref) for ref in shots] if shots is not None else None,
                              system=system, dataset=optimiser.dataset, note=change["note"], base=base,
                              optimisation_id=optimiser.opt_id, limits=optimiser.limits)
        version, prompt_row = result.version, session.get(Prompt, result.version.prompt_id)
    optimiser.add_candidate(version, prompt_row, parent["version"], change, calls=calls, cost=cost)


def _rewrite(optimiser: Optimiser, version: PromptVersion, task: Task, batch: list[dict],
             parent: dict) -> tuple[str | None, int, float]:
    """Ask the rewriter for new instructions; return them (None when refused or not answered) and the calls and cost."""
    spec, state = optimiser.spec, optimiser.state
    options = optimiser.run_options()
    with Session(optimiser.engine) as session:
        rewrite_prompt, rewriter = resolve_version(session, spec.rewriter)
        rewrite_task = session.get(Task, rewrite_prompt.task_id)
    # The judge's endpoint (backend, base URL, key variable); the rewriter's own model when its version names one.
    endpoint = endpoint_for(RunSpec(dataset=optimiser.dataset, prompt=spec.start, backend=spec.backend, model=spec.model,
                                    base_url=spec.base_url, api_key_env=spec.api_key_env), version)
    if rewriter.model:
        endpoint = replace(endpoint, model=rewriter.model)
    base = dict(state["rewrite"])

    def on_write(session: Session, totals: Totals) -> bool:
        opt = session.get(Optimisation, optimiser.opt_id)
        stored = dict(opt.state or {})
        stored["rewrite"] = {"calls": base["calls"] + totals.calls, "cost": base["cost"] + totals.cost}
        opt.state = stored
        session.add(opt)
        return bool(stored.get("cancel"))

    answers, totals = ask_rewrites(optimiser.engine, rewriter=rewriter, rewrite_task=rewrite_task, judged_task=task,
                                   endpoint=endpoint, requests=[{"instructions": version.system, "disagreements": batch}],
                                   options=options, price=price_for(optimiser.prices, endpoint.model), on_write=on_write,
                                   transport=optimiser.transport, limits=optimiser.limits, seed=spec.seed)
    state["rewrite"] = {"calls": base["calls"] + totals.calls, "cost": base["cost"] + totals.cost}
    answer: Answer = answers[0]
    if answer.status == "not_asked":
        optimiser.save()
        optimiser.budget_left()
        raise Stop("cancelled")
    reason = None
    if answer.status != "ok":
        reason = Reason("rewrite_unusable", status=answer.status, error=answer.error[:300])
    else:
        reason = check_rewrite(version.system, answer.value, target=task.target, task=task.name, limits=optimiser.limits)
    if reason is not None:
        state["refused"].append({"round": state["round"], "parent": parent["version"],
                                 "change": {"kind": "rewrite", "note": f"instructions rewritten by {spec.rewriter}"},
                                 "reason": reason.to_dict(), "text": reason.text(), "calls": totals.calls,
                                 "cost": totals.cost})
        optimiser.save()
        optimiser.say(f"round {state['round']}: rewrite refused: {reason.text()}")
        return None, totals.calls, totals.cost
    optimiser.save()
    return answer.value, totals.calls, totals.cost


def _confirm_on_test(optimiser: Optimiser, best: dict) -> None:
    """Score the chosen version once on test (its one recorded look), unless the dataset has no test split."""
    spec, state = optimiser.spec, optimiser.state
    with Session(optimiser.engine) as session:
        dataset = lookup.dataset(session, optimiser.dataset)
        samples, labelled = _split_counts(session, dataset.id, lookup.task(session, spec.task)).get(TEST_SPLIT, (0, 0))
    if not labelled:  # no test split, or one without labels of the task: dev only, and the result says so
        state["test"] = {"none": True, "unlabelled": bool(samples)}
        optimiser.save()
        return
    entry = optimiser.candidate(best["version"])
    entry["runs"] += optimiser.run(best["version"], TEST_SPLIT)
    optimiser.save()
    with write_session(optimiser.engine) as session:  # the look and its record in one transaction: never a look unowned
        row = evaluate_on_test(session, optimiser.dataset, best["version"], task=spec.task,
                               options=_scoring_options(spec, TEST_SPLIT))
        state["test"] = {"evaluation_id": row.id}
        opt = session.get(Optimisation, optimiser.opt_id)
        opt.state = json.loads(json.dumps({**state, "owner": owner_fields()}))
        session.add(opt)


# --------------------------------------------------------------------------- the result


def result_dict(session: Session, opt: Optimisation) -> dict:
    """Return the optimisation as its JSON (docs/loop.md, "Optimise": the keys and what they mean)."""
    state, settings = opt.state or {}, opt.settings or {}
    task = session.get(Task, opt.task_id)
    dataset_name = session.get(Dataset, opt.dataset_id).name
    runs = {int(k): v for k, v in (state.get("runs") or {}).items()}
    run_rows = {r.id: r for r in session.exec(select(JudgeRun).where(JudgeRun.id.in_(list(runs)))).all()} if runs else {}

    def spent(ids: list[int]) -> tuple[int, float]:
        calls, cost = 0, 0.0
        for run_id in ids:
            row = run_rows.get(run_id)
            if row is not None:
                calls += int((row.params or {}).get("calls", 0)) - int(runs[run_id]["calls"])
                cost += float(row.cost or 0.0) - float(runs[run_id]["cost"])
        return calls, cost

    # Train runs are charged to the parent they ran (a run id appears in no candidate's dev or test list).
    charged = {run_id for c in state.get("candidates", []) for run_id in c.get("runs", [])}
    train_runs: dict[str, list[int]] = {}
    for run_id, row in run_rows.items():
        if run_id not in charged:
            judge = session.get(Judge, row.judge_id)
            train_runs.setdefault(judge.name, []).append(run_id)
    candidates = []
    metric = None
    for c in state.get("candidates", []):
        calls, cost = spent(c.get("runs", []) + train_runs.get(c["version"], []))
        dev = c.get("dev") or {}
        metric = metric or dev.get("metric")
        candidates.append({"version": c["version"], "parent": c.get("parent"), "round": c.get("round", 0),
                           "change": c["change"],
                           "dev": {"value": dev.get("value"), "ci": dev.get("ci"), "lower_adjusted": dev.get("lower_adjusted"),
                                   "n": dev.get("n")},
                           "calls": calls + int(c.get("rewrite_calls", 0)), "cost": round(cost + float(c.get("rewrite_cost", 0.0)), 6)})
    looks_test = int(session.exec(select(func.count()).select_from(TestEvaluation).where(
        TestEvaluation.dataset_id == opt.dataset_id, TestEvaluation.task_id == opt.task_id)).one())
    test, decision = None, None
    test_state = state.get("test") or {}
    if test_state.get("evaluation_id"):
        row = session.get(TestEvaluation, test_state["evaluation_id"])
        look = int(session.exec(select(func.count()).select_from(TestEvaluation).where(
            TestEvaluation.dataset_id == opt.dataset_id, TestEvaluation.task_id == opt.task_id,
            TestEvaluation.id <= row.id)).one())
        test = {"version": session.get(Judge, row.judge_id).name, "value": row.value,
                "ci": [row.ci_low, row.ci_high] if row.ci_low is not None else None, "n": row.n, "decision": row.decision,
                "look": look}
        decision = row.decision
    calls = sum(c["calls"] for c in candidates) + sum(int(r.get("calls", 0)) for r in state.get("refused", []))
    cost = sum(c["cost"] for c in candidates) + sum(float(r.get("cost", 0.0)) for r in state.get("refused", []))
    stop = dict(state.get("stop") or {"code": None})
    if stop.get("code"):
        stop["text"] = Reason(f"stop_{stop['code']}", **{k: v for k, v in stop.items() if k != "code"}).text() \
            if stop["code"] in STOP_CODES else stop.get("error", "")
    chosen = state.get("chosen") if stop.get("code") == "target_reached" else None
    out = {
        "optimisation": opt.id, "status": opt.status, "dataset": dataset_name, "task": task.name,
        "from": settings.get("start"), "target": settings.get("target"), "metric": metric,
        "adjustment": settings.get("adjustment"), "confidence": settings.get("confidence"),
        "strategies": settings.get("strategies"), "seed": settings.get("seed"), "rewriter": settings.get("rewriter"),
        "candidates": candidates, "refused": [{k: r.get(k) for k in ("round", "parent", "change", "reason", "text", "calls", "cost")}
                                              for r in state.get("refused", [])],
        "looks": {"dev": int(state.get("looks_dev") or 0), "test": looks_test},
        "best": state.get("best"), "chosen": chosen, "stop": stop, "test": test, "decision": decision,
        "confirmed": test is not None, "ceiling": state.get("ceiling"),
        "calls": calls, "cost": round(cost, 6),
    }
    if chosen is not None and test is None:
        why = "optimise_test_unlabelled" if test_state.get("unlabelled") else "optimise_not_confirmed"
        out["note"] = Reason(why, dataset=dataset_name, task=task.name).text()
    if test is not None and test["look"] > 1:
        out["note"] = Reason("optimise_test_reused", look=test["look"], dataset=dataset_name, task=task.name).text()
    return out


def optimise(engine: Engine, spec: OptimiseSpec, **kwargs: Any) -> dict:
    """Prepare and execute an optimisation (what `calibrate optimise` does)."""
    opt_id = prepare_optimisation(engine, spec, prices=kwargs.get("prices"))
    return execute_optimisation(engine, opt_id, **kwargs)


def settle_dead(session: Session, opt: Optimisation) -> None:
    """Mark a running optimisation whose process is gone `failed` (the same settings take it up); the caller commits."""
    if opt.status == "running" and not optimisation_is_live(session, opt):
        opt.status, opt.error, opt.finished_at = "failed", DEAD_RUN_ERROR, utcnow()
        session.add(opt)


def request_cancel(session: Session, opt: Optimisation) -> None:
    """Ask a running optimisation to stop: after its current step, and its current run after that run's batch."""
    state = dict(opt.state or {})
    state["cancel"] = True
    opt.state = state
    session.add(opt)
    for run_id in state.get("runs") or {}:
        run = session.get(JudgeRun, int(run_id))
        if run is not None and run.status in ("pending", "running"):
            request_stop(session, run)

