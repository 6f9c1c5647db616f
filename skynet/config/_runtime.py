"""From a validated Config to the runtime settings the rest of Skynet runs on (frozen
dataclasses, not pydantic models): [models] as a skynet.models.ModelsConfig."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from skynet.config._errors import dotted
from skynet.config._schema import CONFIG_FILE
from skynet.errors import ConfigError

if TYPE_CHECKING:
    from skynet.config._schema import Config, EndpointConfig
    from skynet.models import ModelsConfig


def models_config(config: Config) -> ModelsConfig:
    """Config.models_config(): one ModelSettings per model named under [models.endpoints] or
    [models.prices], each endpoint's key read from its environment variable, the cache path
    resolved against the project folder."""
    from skynet.models import ModelsConfig, ModelSettings, Price

    section = config.models
    settings: dict[str, ModelSettings] = {}
    for name in sorted(set(section.endpoints) | set(section.prices)):
        declared = section.prices.get(name)
        price = (
            Price(input_per_mtok=declared.input_per_mtok, output_per_mtok=declared.output_per_mtok)
            if declared is not None
            else None
        )
        embedded = name.startswith("local/")
        if price is None and embedded:
            # The embedded model costs nothing; its cost is known, not unmeasured.
            price = Price(input_per_mtok=0, output_per_mtok=0)
        endpoint = section.endpoints.get(name)
        # One llama.cpp context per process: embedded calls queue one at a time. Any other
        # model takes as many calls at once as the run makes ([engine] concurrency), unless its
        # endpoint says fewer: a default below it would silently cap the run.
        slots = 1 if embedded else config.engine.concurrency
        if endpoint is None:
            settings[name] = ModelSettings(max_concurrent=slots, price=price)
            continue
        settings[name] = ModelSettings(
            api_base=endpoint.api_base,
            api_key=_api_key(name, endpoint),
            timeout_s=endpoint.timeout_s,
            max_concurrent=endpoint.max_concurrent or slots,
            rpm=endpoint.rpm,
            price=price,
        )
    cache: Path | None = None
    if section.cache:
        cache = Path(section.cache)
        if not cache.is_absolute():
            cache = config.project_dir / cache
    return ModelsConfig(
        task=section.task,
        # A callable reflection model is called by the engine itself (EngineSettings.
        # reflection_lm): no model serves the role, so a call for it is refused by name.
        reflection=section.reflection if isinstance(section.reflection, str) else "",
        metric=section.metric,
        settings=settings,
        cache_path=cache,
        default_max_concurrent=config.engine.concurrency,
    )


def _api_key(model: str, endpoint: EndpointConfig) -> str | None:
    if endpoint.api_key_env is None:
        return None
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise ConfigError(
            f"{CONFIG_FILE}: {dotted(('models', 'endpoints', model, 'api_key_env'))} names the "
            f"environment variable '{endpoint.api_key_env}', which is not set; export "
            f"{endpoint.api_key_env}=<your key> before running, or remove api_key_env"
        )
    return key
