"""What a model's usage costs, from the ``genai-prices`` table (the ``stopwise[prices]`` extra), never from a table
kept here. A model the table does not know is a ``ConfigError`` when the pricer is built, never a price of zero."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from stopwise.errors import ConfigError
from stopwise.messages import Usage

__all__ = ["Pricer", "pricer_for"]


class Pricer:
    """Prices token usage for one model. Built by ``pricer_for``, which checks the model has a price."""

    __slots__ = ("_calc", "_usage", "model_ref", "provider")

    def __init__(self, model_ref: str, provider: str | None, calc: Any, usage: Any) -> None:
        self.model_ref = model_ref
        self.provider = provider
        self._calc = calc
        self._usage = usage

    def price(self, usage: Usage) -> Decimal:
        """US dollars for ``usage`` at the table's current prices."""
        counted = self._usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
        return Decimal(self._calc(counted, self.model_ref, provider_id=self.provider).total_price)

    def __repr__(self) -> str:
        where = f"{self.provider}:" if self.provider else ""
        return f"Pricer({where}{self.model_ref})"


def pricer_for(model: object, priced_as: str | None, field: str = "limits.priced_as") -> Pricer:
    """A pricer for ``priced_as`` (``"provider:model"`` or a model name), else for the model object's own name
    (``model.model`` and ``model.provider``, as the OpenAI and Anthropic adapters have). Raises ``ConfigError``
    naming ``field`` when there is no name to price by, no price for it, or the extra is not installed."""
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError as exc:
        raise ConfigError(field, "pricing needs the genai-prices package: pip install 'stopwise[prices]'") from exc
    if priced_as is not None:
        provider, _, ref = priced_as.rpartition(":")
        provider_id = provider or None
    else:
        name = getattr(model, "model", None)
        if not isinstance(name, str) or not name:
            raise ConfigError(field, f"cannot tell which model {model!r} is: pass priced_as='provider:model'")
        ref, provider_id = name, getattr(model, "provider", None)
        if provider_id == "openai-compatible":
            provider_id = None
    pricer = Pricer(ref, provider_id, calc_price, PriceUsage)
    try:
        pricer.price(Usage(1, 1))
    except LookupError as exc:
        raise ConfigError(field, f"no price is known for {ref!r}: {exc}") from exc
    return pricer
