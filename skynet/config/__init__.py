"""skynet.toml: read it, apply command-line overrides, validate it, build runtime settings.

Every problem is a ConfigError naming the file (or the override), the dotted key, what was wrong
and the fix. A pydantic ValidationError never leaves this package.

The public names are the ones below; the modules behind them are private, one job each:
_schema (the tables as pydantic models), _sections (the sections scorer packages add, and how
such a Config pickles), _load (TOML, overrides, validation), _errors (a ValidationError as one
ConfigError), _runtime (a Config as runtime settings).
"""

from __future__ import annotations

from skynet.config._load import Overrides, config_from_tables, flat_keys, load_config
from skynet.config._schema import (
    CONFIG_FILE,
    ArtifactConfig,
    BudgetConfig,
    Config,
    DataConfig,
    EndpointConfig,
    EngineConfig,
    Float,
    FromPython,
    Int,
    MetricConfig,
    ModelsSection,
    PriceConfig,
    Section,
    SplitConfig,
    TrackingConfig,
)
from skynet.config._sections import config_model

# A Config pickled by the single-module config.py is made again by skynet.config._unpickled.
from skynet.config._sections import unpickled as _unpickled  # noqa: F401

__all__ = [
    "CONFIG_FILE",
    "ArtifactConfig",
    "BudgetConfig",
    "Config",
    "DataConfig",
    "EndpointConfig",
    "EngineConfig",
    "Float",
    "FromPython",
    "Int",
    "MetricConfig",
    "ModelsSection",
    "Overrides",
    "PriceConfig",
    "Section",
    "SplitConfig",
    "TrackingConfig",
    "config_from_tables",
    "config_model",
    "flat_keys",
    "load_config",
]
