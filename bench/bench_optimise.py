"""Benchmark `calibrate optimise` in two worlds, beside the naive rule and DSPy (issue 32).

A local OpenAI-compatible server (tests/judges/fakellm.py) answers with a judge whose accuracy
depends on its prompt (tests/judges/prompt_world.py): every answer is a draw seeded by the whole
request, so each prompt version draws its own noise. Each claim is about one of 6 topics.

1. **Signal** (`--signal`): 2 topics are judged wrong (accuracy 0.2) until a rule for the topic
   ("Rule for dosage", as a rewrite adds) or a same-topic example (a few-shot) is in the prompt;
   the others are judged right with accuracy 0.95. 120 train, 120 dev, 120 test items. The
   optimiser (max-statistic and Bonferroni, on separate copies of the database) should reach a
   test pass; its candidates and calls are recorded.
2. **Null** (`--null N`): every claim is judged right with accuracy 0.85 whatever the prompt
   (true κ ≈ 0.70 < target 0.75), N worlds (the same items, each world its own noise seed), 40 train,
   100 dev, 100 test,
   at most 8 candidates, `--adjustment max_statistic`. Recorded: the share of runs that claim
   `target_reached`, that pass on test, and the share in which the naive rule — the best raw dev
   value ≥ target — would claim success on the same runs; Bonferroni's bounds read on each run's
   final state (the same candidates and looks) and their gap to the max-statistic's.
3. **Correlation** (`--correlation`): no server; Bonferroni against the max-statistic as the
   versions agree more with each other (the null world's versions are independent: there the two
   coincide), with how often each bound of the best version lies above the true κ.
4. **DSPy** (`--dspy`): the same signal world, a `dspy.Predict` judge (question, contexts, claim →
   verdict) pointed at the same server through LiteLLM, optimised with
   `BootstrapFewShotWithRandomSearch` on the train split (its default validation set is its
   training set), scored on the same test items: its test κ, its own claim, its calls.

    .venv/bin/python bench/bench_optimise.py --signal --null 200 --correlation --dspy [--record]

The null worlds can be shared out over processes (`--null N --offset K --rows FILE.jsonl` each,
rows written as they are made) and the report written from the saved figures:
`--report signal.json dspy.json rows*.jsonl [--record]`.

`--record` writes bench/results/optimise.md (the figures and the machine's load).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "optimise.md"
sys.path.insert(0, str(ROOT / "tests" / "judges"))
sys.path.insert(0, str(ROOT / "tests" / "loop"))

from fakellm import FakeLLM
from optimise_helpers import load_world
from prompt_world import TOPICS, PromptWorld

TARGET = 0.75


def build_template(folder: Path, world: PromptWorld) -> Path:
    """Migrate a database, load the world and `claims@1`; return its file."""
    from calibrate.db import dispose_engine, get_engine, write_session
    from calibrate.migrations import upgrade
    from calibrate.tasks import ensure_builtin_tasks

    path = folder / "template.sqlite"
    url = f"sqlite:///{path}"
    engine = get_engine(url)
    upgrade(engine)
    with write_session(engine) as session:
        ensure_builtin_tasks(session)
    load_world(engine, folder, world)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    dispose_engine(url)
    return path


def optimise_once(template: Path, folder: Path, server: FakeLLM, *, adjustment: str, max_candidates: int,
                  name: str, keep: bool = False) -> dict:
    """Copy the template and optimise `claims@1` on it; return the result with the seconds it took."""
    from calibrate.db import dispose_engine, get_engine
    from calibrate.judges.sandbox import DEFAULT_LIMITS
    from calibrate.loop.optimise import OptimiseSpec, optimise

    # Renders in this process (the bench's own templates: nothing hostile), not through the worker pool's pipes:
    # the figures here are rates, not timings, and 200 optimisations are some 200,000 calls.
    limits = dataclasses.replace(DEFAULT_LIMITS, isolated=False)

    path = folder / f"{name}.sqlite"
    shutil.copyfile(template, path)
    url = f"sqlite:///{path}"
    engine = get_engine(url)
    spec = OptimiseSpec(dataset="world", task="claim_support", start="claims@1", backend="openai", model="fake-model",
                        base_url=server.openai_base, api_key_env="", concurrency=8, target=TARGET,
                        max_candidates=max_candidates, adjustment=adjustment)
    before = server.stats()["requests"]
    started = time.perf_counter()
    result = optimise(engine, spec, prices={}, limits=limits)
    result["seconds"] = time.perf_counter() - started
    result["server_requests"] = server.stats()["requests"] - before
    dispose_engine(url)
    if not keep:
        path.unlink()
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    return result


def signal_world(seed: int = 0) -> PromptWorld:
    return PromptWorld.make(n_train=120, n_dev=120, n_test=120, hard={"dosage", "timing"}, topics=TOPICS, seed=seed,
                            easy_accuracy=0.95, hard_accuracy=0.2)


def null_world(seed: int) -> PromptWorld:
    return PromptWorld.make(n_train=40, n_dev=100, n_test=100, hard=set(), topics=TOPICS, seed=seed, null=True,
                            null_accuracy=0.85)


def run_signal(folder: Path, server: FakeLLM) -> dict:
    world = signal_world()
    server.responder = world
    (folder / "signal").mkdir()
    template = build_template(folder / "signal", world)
    out = {}
    for adjustment in ("max_statistic", "bonferroni"):
        out[adjustment] = optimise_once(template, folder / "signal", server, adjustment=adjustment, max_candidates=12,
                                        name=f"signal-{adjustment}")
    return out


def bonferroni_bounds(path: Path, result: dict) -> dict:
    """Return every candidate's Bonferroni bound on the final state of an optimisation (the same looks, no call)."""
    from sqlmodel import Session

    from calibrate.calibration import Options, score_candidates
    from calibrate.db import get_engine

    with Session(get_engine(f"sqlite:///{path}")) as session:
        scored = score_candidates(session, "world", "claim_support", [c["version"] for c in result["candidates"]],
                                  looks=result["looks"]["dev"], options=Options(split="dev", threshold=TARGET),
                                  adjustment="bonferroni")
    return scored.lower_adjusted


def run_null(folder: Path, server: FakeLLM, n: int, *, offset: int = 0, rows_file: Path | None = None) -> dict:
    """One optimisation (max-statistic) per null world; Bonferroni's bounds read on its final state, no call.

    Worlds `offset` … `offset + n - 1`; each row is appended to `rows_file` as it is made (several processes can share
    the worlds out, and `--report` reads their rows back)."""
    rows = []
    world = null_world(1000)
    server.responder = world
    (folder / "null").mkdir()
    template = build_template(folder / "null", world)  # the same items in every world: only the judge's noise differs
    for i in range(offset, offset + n):
        world.seed = 1000 + i  # every answer is a draw seeded by (world, prompt, item): a new world's noise
        where = folder / f"null-{i}"
        where.mkdir()
        result = optimise_once(template, where, server, adjustment="max_statistic", max_candidates=8, name="run", keep=True)
        bonferroni = bonferroni_bounds(where / "run.sqlite", result)
        values = [c["dev"]["value"] for c in result["candidates"] if c["dev"]["value"] is not None]
        lows = [c["dev"]["lower_adjusted"] for c in result["candidates"] if c["dev"]["lower_adjusted"] is not None]
        rows.append({"world": i, "reached": result["stop"]["code"] == "target_reached", "stop": result["stop"]["code"],
                     "test_pass": result["decision"] == "pass", "naive": max(values) >= TARGET, "best_value": max(values),
                     "best_lower": max(lows) if lows else None,
                     "best_bonferroni": max((v for v in bonferroni.values() if v is not None), default=None),
                     "bonferroni_reached": any(v is not None and v >= TARGET for v in bonferroni.values()),
                     "candidates": len(result["candidates"]), "looks": result["looks"]["dev"], "calls": result["calls"],
                     "seconds": result["seconds"]})
        if rows_file is not None:
            with rows_file.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(rows[-1]) + "\n")
        shutil.rmtree(where)
        if len(rows) % 10 == 0:
            print(f"null world {i + 1}/{n}: reached {sum(r['reached'] for r in rows)}, naive {sum(r['naive'] for r in rows)}",
                  file=sys.stderr, flush=True)
    return {"rows": rows}


def run_correlation(reps: int = 200) -> dict:
    """Bonferroni against the max-statistic when candidates are correlated (no server: the statistics alone).

    8 versions of a judge right with probability 0.85 on 120 balanced items (true κ 0.70); each version keeps a
    shared verdict on a share `rho` of the items and draws its own elsewhere (rho 0: the null world's independent
    noise; real prompt variants mostly agree). Per rho: the mean adjusted level γ, the mean gap between the best
    version's two bounds, and how often each bound of the best version lies above the true κ.
    """
    import numpy as np

    from calibrate import stats

    out = {}
    n, k, accuracy, truth = 120, 8, 0.85, 0.70
    for rho in (0.0, 0.5, 0.8, 0.95):
        rng = np.random.default_rng(int(rho * 100))
        gaps, levels, over = [], [], {"max_statistic": 0, "bonferroni": 0, "unadjusted": 0}
        for rep in range(reps):
            gold = rng.integers(0, 2, n)
            shared = np.where(rng.random(n) < accuracy, gold, 1 - gold)
            judges = [np.where(rng.random(n) < rho, shared, np.where(rng.random(n) < accuracy, gold, 1 - gold)) for _ in range(k)]
            idx = stats.bootstrap_index_matrix(n, n_resamples=stats.resamples_needed(k), seed=rep)
            values = np.column_stack([stats.kappa_resamples(gold, j, np.arange(n), idx, n_labels=2) for j in judges])
            best = int(np.argmax([stats.cohen_kappa(gold, j, labels=[0, 1]).value for j in judges]))
            maxstat = stats.selection_lower_bounds(values, looks=k, method="max_statistic")
            bonf = stats.selection_lower_bounds(values, looks=k, method="bonferroni")
            levels.append(maxstat.level)
            gaps.append(maxstat.lower[best] - bonf.lower[best])
            over["max_statistic"] += maxstat.lower[best] > truth
            over["bonferroni"] += bonf.lower[best] > truth
            over["unadjusted"] += float(np.quantile(values[:, best], 0.025)) > truth
        out[str(rho)] = {"reps": reps, "level": float(np.mean(levels)), "bonferroni_level": 0.025 / k,
                         "gap_mean": float(np.mean(gaps)), "gap_median": float(np.median(gaps)), "over": over}
    return out


def run_dspy(server: FakeLLM) -> dict:
    """Optimise a DSPy judge of the signal world on its train split; score it on the test split."""
    try:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import dspy
        from dspy.teleprompt import BootstrapFewShotWithRandomSearch
    except Exception as exc:
        return {"error": f"dspy could not be imported: {type(exc).__name__}: {exc}"}
    from calibrate import stats

    world = signal_world()
    server.responder = world
    lm = dspy.LM("openai/fake-model", api_base=server.openai_base, api_key="none", cache=False, temperature=0,
                 max_tokens=200)
    dspy.configure(lm=lm)

    class Judge(dspy.Signature):
        """Is the claim supported by the contexts? Answer supported or unsupported."""

        question: str = dspy.InputField()
        contexts: str = dspy.InputField()
        claim: str = dspy.InputField()
        verdict: str = dspy.OutputField(desc="supported or unsupported")

    def examples(split: str) -> list:
        out = []
        for sample in world.samples:
            if sample["metadata"]["split"] == split:
                claim = sample["claims"][0]
                out.append(dspy.Example(question=sample["question"], contexts=" ".join(sample["contexts"]), claim=claim,
                                        verdict=world.gold[claim]).with_inputs("question", "contexts", "claim"))
        return out

    train, test = examples("train"), examples("test")

    def metric(example, prediction, trace=None) -> bool:
        return str(getattr(prediction, "verdict", "")).strip().lower() == example.verdict

    before = server.stats()["requests"]
    started = time.perf_counter()
    optimizer = BootstrapFewShotWithRandomSearch(metric=metric, max_bootstrapped_demos=4, max_labeled_demos=4,
                                                 num_candidate_programs=6, num_threads=8)
    try:
        program = optimizer.compile(dspy.Predict(Judge), trainset=train)
    except Exception as exc:
        return {"error": f"dspy optimisation failed: {type(exc).__name__}: {exc}"}
    calls_optimise = server.stats()["requests"] - before
    claim = max((score for _, score in getattr(program, "candidate_programs", []) and
                 [(c.get("program"), c.get("score")) for c in program.candidate_programs]), default=None)
    gold, judged = [], []
    for example in test:
        prediction = program(question=example.question, contexts=example.contexts, claim=example.claim)
        gold.append(example.verdict)
        judged.append(str(getattr(prediction, "verdict", "")).strip().lower())
    kappa = stats.cohen_kappa(gold, judged, labels=["supported", "unsupported"])
    clusters = list(range(len(gold)))
    labels = ["supported", "unsupported", "other"]
    codes = [[labels.index(v) if v in labels else 2 for v in side] for side in (gold, judged)]
    ci = stats.cluster_bootstrap_kappa(codes[0], codes[1], clusters, n_labels=3).ci
    return {"test_kappa": kappa.value, "test_ci": ci, "own_claim": claim, "claim_on": "its training set (no separate validation set)",
            "calls_optimise": calls_optimise, "calls_total": server.stats()["requests"] - before,
            "seconds": time.perf_counter() - started, "demos": len(program.demos) if hasattr(program, "demos") else None,
            "version": getattr(dspy, "__version__", "?")}


def rate(rows: list[dict], adjustment: str, key: str) -> tuple[int, float]:
    count = sum(1 for r in rows if r[adjustment][key])
    return count, count / len(rows) if rows else 0.0


def report(out: dict) -> str:
    load = os.getloadavg()
    lines = [f"# calibrate optimise: two worlds, the naive rule and DSPy ({dt.date.today().isoformat()})", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other engineers; load average at the end "
             f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}. Server: tests/judges/fakellm.py with the prompt world "
             "(tests/judges/prompt_world.py) on loopback, no latency. Script: bench/bench_optimise.py.", ""]
    if "signal" in out:
        lines += ["## Signal world", "",
                  "6 topics, 2 of them judged wrong (accuracy 0.2) until a rule or a same-topic example is in the prompt, the "
                  "others right with 0.95; 120 train, 120 dev, 120 test items; target κ 0.75; at most 12 candidates.", ""]
        for adjustment, result in out["signal"].items():
            lines += [f"### {adjustment}", "",
                      f"Stop: **{result['stop']['code']}** — {result['stop'].get('text', '')}. Chosen: {result['chosen']}; "
                      f"test: {json.dumps(result['test'])}; decision **{result['decision']}**. Calls {result['calls']} "
                      f"(server saw {result['server_requests']}), {result['seconds']:.1f} s; looks on dev {result['looks']['dev']}.",
                      "", "| version | parent | change | dev κ | CI | lower_adjusted | n | calls |", "|---|---|---|---:|---|---:|---:|---:|"]
            for c in result["candidates"]:
                ci = c["dev"]["ci"]
                lines.append(f"| {c['version']} | {c['parent'] or '—'} | {c['change']['kind']} | {c['dev']['value']:.3f} | "
                             f"[{ci[0]:.3f}, {ci[1]:.3f}] | {c['dev']['lower_adjusted']:.3f} | {c['dev']['n']} | {c['calls']} |")
            lines.append("")
    if "null" in out:
        rows = out["null"]["rows"]
        n = len(rows)

        def share(key: str) -> str:
            count = sum(1 for r in rows if r[key])
            return f"{count}/{n} ({count / n:.1%})"

        gaps = [r["best_lower"] - r["best_bonferroni"] for r in rows if r["best_lower"] is not None and r["best_bonferroni"] is not None]
        stops: dict[str, int] = {}
        for r in rows:
            stops[r["stop"]] = stops.get(r["stop"], 0) + 1
        lines += ["## Null world", "",
                  f"{n} worlds: every claim judged right with accuracy 0.85 whatever the prompt (true κ ≈ 0.70, below the "
                  "target 0.75); the same 40 train, 100 dev and 100 test items in every world, each world its own noise "
                  "seed (and each prompt version its own noise); at most 8 candidates; `--adjustment max_statistic`. Bonferroni's bounds are read on each "
                  "run's final state (the same candidates and looks, no call).", "",
                  "| rule | claims success | passes on test |", "|---|---:|---:|",
                  f"| calibrate optimise (max-statistic `lower_adjusted` ≥ 0.75) | {share('reached')} | {share('test_pass')} |",
                  f"| Bonferroni bound ≥ 0.75 on the same final states | {share('bonferroni_reached')} | — |",
                  f"| naive rule: best raw dev κ ≥ 0.75, same runs | {share('naive')} | — |", "",
                  (f"Best lower bound, max-statistic minus Bonferroni: mean {statistics.mean(gaps):+.4f}, median "
                   f"{statistics.median(gaps):+.4f}, max {max(gaps):+.4f} over {len(gaps)} runs (never negative: the min-p "
                   "level is never below α/m)." if gaps else ""),
                  f"Stops: {json.dumps(stops)}. Mean candidates {statistics.mean(r['candidates'] for r in rows):.1f}, "
                  f"mean looks on dev {statistics.mean(r['looks'] for r in rows):.1f}, mean calls "
                  f"{statistics.mean(r['calls'] for r in rows):.0f}, mean best raw dev κ "
                  f"{statistics.mean(r['best_value'] for r in rows):.3f}, mean best lower_adjusted "
                  f"{statistics.mean(r['best_lower'] for r in rows if r['best_lower'] is not None):.3f}, mean seconds per "
                  f"optimisation {statistics.mean(r['seconds'] for r in rows):.1f}.", ""]
    if "correlation" in out:
        lines += ["## Bonferroni against the max-statistic, by how much the versions agree", "",
                  "No server: 8 versions of a judge right with probability 0.85 on 120 balanced items (true κ 0.70), each "
                  "keeping a shared verdict on a share ρ of the items and its own draw elsewhere (ρ = 0 is the null world's "
                  "independent noise; prompt variants of one judge mostly agree). Per ρ, "
                  f"{next(iter(out['correlation'].values()))['reps']} simulated dev sets.", "",
                  "| ρ | max-statistic level γ (Bonferroni 0.0031) | best version's bound, max-statistic − Bonferroni (mean, median) | "
                  "best bound above the true κ: max-statistic / Bonferroni / unadjusted |", "|---:|---:|---:|---|"]
        for rho, r in out["correlation"].items():
            o = r["over"]
            lines.append(f"| {rho} | {r['level']:.4f} | {r['gap_mean']:+.4f}, {r['gap_median']:+.4f} | "
                         f"{o['max_statistic'] / r['reps']:.1%} / {o['bonferroni'] / r['reps']:.1%} / {o['unadjusted'] / r['reps']:.1%} |")
        lines.append("")
    if "dspy" in out:
        d = out["dspy"]
        lines += ["## DSPy on the same world", ""]
        if "error" in d:
            lines += [f"Not run: {d['error']}", ""]
        else:
            lines += [f"dspy {d['version']}, `BootstrapFewShotWithRandomSearch` (4 bootstrapped + 4 labelled demos, 6 candidate "
                      "programs) on the 120 train items, pointed at the same server through LiteLLM. Its own claim: "
                      f"{d['own_claim']} (% correct on {d['claim_on']}). Test κ {d['test_kappa']:.3f} "
                      f"[{d['test_ci'][0]:.3f}, {d['test_ci'][1]:.3f}] on the same 120 test items. Calls: {d['calls_optimise']} "
                      f"to optimise, {d['calls_total']} with the test; {d['seconds']:.1f} s.", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signal", action="store_true")
    parser.add_argument("--null", type=int, default=0, help="null worlds to run (≥ 200 for the record)")
    parser.add_argument("--dspy", action="store_true")
    parser.add_argument("--correlation", action="store_true", help="Bonferroni against the max-statistic by agreement")
    parser.add_argument("--offset", type=int, default=0, help="the first null world's index (to share them out)")
    parser.add_argument("--rows", type=Path, help="append each null world's row to this JSONL file as it is made")
    parser.add_argument("--report", type=Path, nargs="*", help="write the report from saved figures: --json files of "
                        "earlier runs and --rows files, no run")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    if args.report is not None:
        out: dict = {}
        for path in args.report:
            if path.suffix == ".jsonl":
                rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
                out.setdefault("null", {"rows": []})["rows"].extend(rows)
            else:
                out.update({k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if k != "null"})
        if "null" in out:  # one row per world (processes sharing the worlds out may overlap)
            out["null"]["rows"] = sorted({r["world"]: r for r in out["null"]["rows"]}.values(), key=lambda r: r["world"])
        text = report(out)
        print(text)
        if args.record:
            RESULTS.write_text(text, encoding="utf-8")
        return
    server = FakeLLM().start()
    server.keep_requests = False
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["CALIBRATE_INSTANCE"] = str(folder / "instance")
        if args.signal:
            out["signal"] = run_signal(folder, server)
        if args.null:
            out["null"] = run_null(folder, server, args.null, offset=args.offset, rows_file=args.rows)
        if args.dspy:
            out["dspy"] = run_dspy(server)
        if args.correlation:
            out["correlation"] = run_correlation()
    server.stop()
    text = report(out)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    if args.record:
        RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
