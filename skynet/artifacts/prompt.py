"""The prompt artifact: named texts being optimized, and a user-message template.

prompt.md is split into sections by marker lines `=== name ===`. The section named `user` is the
user-message template, with `{column}` placeholders for the item's input columns (write `{{` and
`}}` for literal braces); it is not optimized. Every other section is a component being optimized,
in file order; together they form one candidate dict and make up the system message.

    === instructions ===
    Answer the question about capital cities in one short sentence.
    === user ===
    What is the capital of {country}?

A file with no marker line is one component, `instructions`, and the user template lists the input
columns as `name: {name}` lines.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from skynet.errors import ConfigError
from skynet.textfile import read_text

if TYPE_CHECKING:
    from skynet.artifacts.base import TaskRunner
    from skynet.config import Config
    from skynet.data import Dataset
    from skynet.models import Models

__all__ = ["PromptArtifact", "from_project", "load_prompt", "render_prompt"]

_MARKER = re.compile(r"^===\s*([A-Za-z_][A-Za-z0-9_\-]*)\s*===\s*$")
USER = "user"


@dataclass(frozen=True, slots=True)
class PromptArtifact:
    """A loaded prompt.

    Attributes:
        components: the seed candidate: component name -> text, in file order.
        user_template: the user-message template.
        path: where it was read from.
    """

    kind: ClassVar[str] = "prompt"
    label: ClassVar[str] = "prompt"
    best_file: ClassVar[str] = "best_prompt.md"
    uses_task_model: ClassVar[bool] = True

    components: dict[str, str]
    user_template: str
    path: Path | None = None

    @property
    def isolation(self) -> str | None:
        return None  # a prompt runs no code of its own

    @property
    def unsandboxed(self) -> bool:
        return False

    def fingerprint(self, settings: Any, task_model: str | None) -> str:
        return json.dumps(
            [
                task_model,
                settings.max_tokens,
                settings.temperature,
                self.user_template,
                settings.tools,
            ]
        )

    def task(self, models: Models, settings: Any) -> TaskRunner:
        """One chat completion by the task model per item; with `tools = "row"`, the item's
        tools are sent and the reply's tool calls returned unparsed (the scorer judges them)."""
        from skynet.evaluation import current_draw

        def run_prompt(candidate: dict[str, str], input: dict[str, Any]) -> str:
            reply = models.complete(
                "task",
                self.messages(candidate, input),
                max_tokens=settings.max_tokens,
                temperature=settings.temperature,
                draw=current_draw(),  # repeat = N: each run of the item its own reply
            )
            return reply.text

        if settings.tools != "row":
            return run_prompt
        tool_choice: str | dict[str, Any] = (
            settings.tool_choice
            if settings.tool_choice in ("auto", "none", "required")
            else {"type": "function", "function": {"name": settings.tool_choice}}
        )

        def run_with_tools(candidate: dict[str, str], input: dict[str, Any]) -> dict[str, Any]:
            from skynet.tool_schemas import tool_schemas

            reply = models.complete(
                "task",
                self.messages(candidate, input),
                max_tokens=settings.max_tokens,
                temperature=settings.temperature,
                tools=tool_schemas(input),
                # Without it llama.cpp's chatml-function-calling server calls no tool at all.
                tool_choice=tool_choice,
                draw=current_draw(),
            )
            return {
                "text": reply.text,
                "calls": [dict(call) for call in reply.tool_calls],
                "truncated": reply.finish_reason == "length",
            }

        return run_with_tools

    def null_placeholders(self, items: Sequence[Any]) -> list[tuple[str, str]]:
        """(item id, column) for each null input the user template puts in a message."""
        names = _placeholders(self.user_template)
        return [(i.id, n) for i in items for n in names if n in i.input and i.input[n] is None]

    def render(self, candidate: dict[str, str]) -> str:
        return render_prompt(self, candidate)

    def save(self, candidate: dict[str, str], path: Path) -> None:
        path.write_text(self.render(candidate), encoding="utf-8")

    def read_candidate(
        self, path: Path, *, inputs: list[str], key: str, missing: str
    ) -> dict[str, str]:
        return load_prompt(path, inputs, key=key).components

    def messages(self, candidate: dict[str, str], input: dict[str, Any]) -> list[dict[str, str]]:
        """The chat messages for one item under `candidate` (a dict with the same components)."""
        system = "\n\n".join(
            candidate[name].strip() for name in self.components if name in candidate
        )
        user = self.user_template.format_map(_Columns(input))
        messages = [{"role": "system", "content": system}] if system.strip() else []
        messages.append({"role": "user", "content": user})
        return messages


class _Columns(dict):
    """An item's input columns as the user template reads them: a null (None) is empty text,
    never the word "None" (`skynet check` notes the items that have one)."""

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        return "" if value is None else value

    def __missing__(self, key: str) -> str:  # checked at load; kept for safety
        raise KeyError(key)


def _placeholders(template: str) -> list[str]:
    names = []
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None:
            names.append(field)
    return names


def load_prompt(
    path: Path, inputs: Sequence[str], *, key: str = "artifact.path in skynet.toml"
) -> PromptArtifact:
    """Read prompt.md and check its placeholders against the input columns.

    Args:
        path: the prompt file.
        inputs: the input columns its placeholders may name.
        key: where the user named the file, for the messages (e.g. "--candidate").

    Raises:
        ConfigError: the file is missing, unreadable or not UTF-8, or empty, a section is
            repeated, a placeholder names no input column, or the user template names none
            (the message names file, line and the known columns).
    """
    text = read_text(
        path, what="prompt", key=key, missing=f"no such prompt file; set {key} to your prompt"
    )
    sections: dict[str, list[str]] = {}
    starts: dict[str, int] = {}
    current: str | None = None
    preamble: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        marker = _MARKER.match(line)
        if marker:
            name: str = marker.group(1)
            if name in sections:
                raise ConfigError(
                    f"{path}:{lineno}: section '{name}' appears twice (first at line "
                    f"{starts[name]}); give each section its own name"
                )
            sections[name], starts[name] = [], lineno
            current = name
        elif current is None:
            preamble.append(line)
        else:
            sections[current].append(line)
    if not sections:
        body = text.strip()
        if not body:
            raise ConfigError(f"{path}: the prompt is empty; write the instructions to optimize")
        components = {"instructions": body}
        template = "\n".join(f"{name}: {{{name}}}" for name in inputs)
        template_line = 0
    else:
        if "".join(preamble).strip():
            raise ConfigError(
                f"{path}:1: text before the first '=== name ===' line belongs to no section; "
                "start the file with a marker such as '=== instructions ==='"
            )
        user_lines = sections.pop(USER, None)
        if user_lines is None:
            template = "\n".join(f"{name}: {{{name}}}" for name in inputs)
            template_line = 0
        else:
            template = "\n".join(user_lines).strip()
            template_line = starts[USER]
        components = {name: "\n".join(lines).strip() for name, lines in sections.items()}
        if not components:
            raise ConfigError(
                f"{path}: only a '{USER}' section; add a section to optimize, e.g. "
                "'=== instructions ==='"
            )
    try:
        names = _placeholders(template)
    except ValueError as exc:
        raise ConfigError(
            f"{path}:{template_line}: the user template is not a valid format string ({exc}); "
            "write {{ and }} for literal braces"
        ) from None
    unknown = [n for n in names if n not in inputs]
    if unknown:
        raise ConfigError(
            f"{path}:{template_line}: placeholder {{{unknown[0]}}} names no input column; the "
            f"input columns are {', '.join(inputs) or '(none)'} ([data] inputs in skynet.toml)"
        )
    if not names and inputs:
        # Every item would send the model the same message: nothing of the item reaches it.
        what = "is empty" if not template else "names no input column"
        raise ConfigError(
            f"{path}:{template_line}: the '{USER}' section {what}, so no item's input reaches "
            f"the model; add a placeholder such as {{{inputs[0]}}} (the input columns are "
            f"{', '.join(inputs)}), or remove the section to send every input column"
        )
    return PromptArtifact(components=components, user_template=template, path=path)


def render_prompt(artifact: PromptArtifact, candidate: dict[str, str]) -> str:
    """prompt.md text for `candidate`, in the same format the artifact was read from."""
    parts = [f"=== {name} ===\n{candidate.get(name, '').strip()}\n" for name in artifact.components]
    parts.append(f"=== {USER} ===\n{artifact.user_template}\n")
    return "".join(parts)


def from_project(project_dir: Path, config: Config, dataset: Dataset) -> PromptArtifact:
    """[artifact] kind = "prompt": the project's prompt.md, its placeholders checked against
    the input columns; with `tools = "row"`, every row's tools converted now, so type words
    outside the grammar refuse the dataset before anything is spent.

    Raises:
        ConfigError: a bad prompt file, or `tools = "row"` without a "tools" input column.
    """
    art = config.artifact
    artifact = load_prompt(project_dir / art.path, config.data.inputs)
    if art.tools == "row":
        if "tools" not in config.data.inputs:
            raise ConfigError(
                f"{project_dir / 'skynet.toml'}: [artifact] tools = 'row' sends each item's "
                "'tools' column, but data.inputs does not list 'tools'; add it"
            )
        from skynet.tool_schemas import tool_schemas

        for split in (dataset.train, dataset.val, dataset.test):
            for item in split:
                tool_schemas(item.input, row_name=item.id)
    return artifact
