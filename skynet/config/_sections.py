"""The sections scorer packages own ([judge], a plugin's [my-scorer]): a Config model made at
run time with them as fields, and how a Config of such a model pickles.

A Config travels to worker processes and Ray actors by pickle (skynet.executors), where its
class, made at run time, cannot be imported by name: Config.__reduce__ sends the names of the
packages it was made from, and `unpickled` makes the same model again in the worker.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pydantic import Field, create_model

from skynet.config._schema import Config


def config_model(raw: Mapping[str, Any]) -> type[Config]:
    """The Config model for `raw` (a file's tables, or a run's recorded config): Config with the
    sections of the scorer packages (skynet.packages) it may hold: every built-in package's, and
    a plugin package's when `raw` has its section or names it as the metric (a plugin is
    imported only when asked for)."""
    from skynet import registry

    wanted = set(registry.BUILTIN["package"])
    metric = raw.get("metric")
    named = metric.get("name") if isinstance(metric, Mapping) else None
    for key in [*raw, named]:
        if (
            isinstance(key, str)
            and key not in Config.model_fields
            and registry.is_known("package", key)
        ):
            wanted.add(key)
    return _with_sections(tuple(sorted(wanted)))


@functools.cache
def _with_sections(names: tuple[str, ...]) -> type[Config]:
    from skynet import registry

    fields: dict[str, Any] = {}
    for name in names:
        section = registry.load("package", name).section
        if section is not None and name not in Config.model_fields:
            fields[name] = (
                section | None,
                Field(default=None, description=f'a [{name}] section (for metric = "{name}")'),
            )
    if not fields:
        return Config
    # Named where Config is imported from, as the Config it extends.
    model = create_model("Config", __base__=Config, __module__="skynet.config", **fields)
    SECTIONS[model] = names
    return model


# A Config model with package sections -> the names it was made from (to make it again when a
# Config is unpickled in another process: a worker).
SECTIONS: dict[type, tuple[str, ...]] = {}


def unpickled(names: tuple[str, ...], state: Any) -> Config:
    """A pickled Config made again: its model from the package names, then its state. A pickle
    made by the single-module config.py names this skynet.config._unpickled, still exported."""
    model = _with_sections(names)
    config = model.__new__(model)
    config.__setstate__(state)
    return config
