"""The per-model price table: bundled defaults (prices.json beside this module), overridden
model by model by `instance/prices.json` (same shape), which the user edits.

Shape: {"models": {"MODEL": {"input": USD per 1M tokens, "output": …, "cached_input": …}}}.
A model matches its own entry or the longest entry its name starts with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from calibrate.judges.errors import RunSetupError
from calibrate.reasons import Reason

BUNDLED = Path(__file__).resolve().parent / "prices.json"


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """Return the cost in USD of one call's tokens."""
        cached = min(cached_input_tokens, input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return ((input_tokens - cached) * self.input + cached * cached_rate + output_tokens * self.output) / 1_000_000


def load_prices(instance_path: str | Path | None = None) -> dict[str, Price]:
    """Return the price table: bundled entries, then those of `instance/prices.json`."""
    table = _read(BUNDLED)
    if instance_path is not None:
        override = Path(instance_path) / "prices.json"
        if override.is_file():
            table.update(_read(override))
    return table


def _read(path: Path) -> dict[str, Price]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        models = data["models"]
        return {name: Price(float(p["input"]), float(p["output"]),
                            None if p.get("cached_input") is None else float(p["cached_input"]))
                for name, p in models.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RunSetupError(Reason("prices_not_a_table", path=str(path), error=f"{type(exc).__name__}: {exc}")) from exc


def price_for(table: dict[str, Price], model: str) -> Price | None:
    """Return the price of a model: its own entry, else the longest entry it starts with."""
    if model in table:
        return table[model]
    matches = [name for name in table if model.startswith(name)]
    return table[max(matches, key=len)] if matches else None
