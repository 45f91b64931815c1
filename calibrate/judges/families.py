"""Model families and the self-preference guard: a judge grading answers of its own model family."""

from __future__ import annotations

import re

from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate.models import (
    Dataset,
    Judge,
    JudgeRun,
    PromptVersion,
    Sample,
)

# Model name prefix → family, for the self-preference guard (a judge grading its own family's answers).
MODEL_FAMILIES = {"gpt": "openai", "chatgpt": "openai", "o1": "openai", "o3": "openai", "o4": "openai", "text-davinci": "openai",
                  "claude": "anthropic", "gemini": "google", "gemma": "google", "palm": "google", "llama": "meta",
                  "mistral": "mistral", "mixtral": "mistral", "ministral": "mistral", "codestral": "mistral",
                  "qwen": "qwen", "deepseek": "deepseek", "command": "cohere", "phi": "microsoft", "grok": "xai"}


def model_family(model: str | None) -> str | None:
    """Return the family of a model name (`openai/gpt-4o-mini` → openai, `llama-3.1-8b` → meta), or None for no model."""
    name = (model or "").strip().lower().rsplit("/", 1)[-1]
    if not name:
        return None
    for prefix in sorted(MODEL_FAMILIES, key=len, reverse=True):
        if name.startswith(prefix):
            return MODEL_FAMILIES[prefix]

    match = re.match(r"[a-z]+", name)
    return match.group(0) if match else name


def self_preference_warnings(session: Session, dataset: Dataset, judge: Judge | None, samples: set[int] | None = None) -> list[dict]:
    """Return a warning per generator model (sample `metadata.generator_model`) of the judge's own model family.

    The judge's models: its prompt version's `model` and the models of its runs on the dataset
    (imported judges name no model: nothing to compare).
    """

    if judge is None:
        return []
    models = set(session.exec(select(JudgeRun.model).where(JudgeRun.judge_id == judge.id, JudgeRun.dataset_id == dataset.id)).all())
    if judge.prompt_version_id is not None:
        version = session.get(PromptVersion, judge.prompt_version_id)
        models.add(version.model if version else "")
    families = {model_family(m): m for m in sorted(models) if model_family(m)}
    if not families:
        return []
    counts: dict[str, int] = {}
    for sid, meta in session.execute(sa_select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all():
        if samples is not None and sid not in samples:
            continue
        generator = meta.get("generator_model") if isinstance(meta, dict) else None
        if generator:
            counts[str(generator)] = counts.get(str(generator), 0) + 1
    out = []
    for generator, n in sorted(counts.items()):
        family = model_family(generator)
        if family in families:
            out.append({"kind": "self_preference", "judge_model": families[family], "generator_model": generator,
                        "family": family, "n_samples": n,
                        "message": (f"the judge model {families[family]} is of the same family ({family}) as the generator "
                                    f"{generator} of {n} samples: judges tend to prefer their own family's answers, so "
                                    f"check its alignment on those samples (--group-by metadata.generator_model)")})
    return out
