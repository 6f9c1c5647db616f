"""The prompt artifact: sections, the user template, placeholders checked at load."""

from __future__ import annotations

import pytest

from skynet import ConfigError
from skynet.artifacts.prompt import load_prompt, render_prompt


def write(tmp_path, text):
    path = tmp_path / "prompt.md"
    path.write_text(text)
    return path


def test_sections_are_components_and_user_is_the_template(tmp_path):
    path = write(
        tmp_path,
        "=== system ===\nBe brief.\n=== format ===\nOne sentence.\n=== user ===\nCountry: {country}\n",
    )
    art = load_prompt(path, ["country"])
    assert art.components == {"system": "Be brief.", "format": "One sentence."}
    assert art.messages({"system": "S", "format": "F"}, {"country": "Peru"}) == [
        {"role": "system", "content": "S\n\nF"},
        {"role": "user", "content": "Country: Peru"},
    ]


def test_a_file_without_markers_is_one_component_with_a_default_template(tmp_path):
    art = load_prompt(write(tmp_path, "Answer briefly.\n"), ["question", "context"])
    assert art.components == {"instructions": "Answer briefly."}
    assert art.messages(art.components, {"question": "q?", "context": "c"})[1]["content"] == (
        "question: q?\ncontext: c"
    )


def test_literal_braces_survive(tmp_path):
    art = load_prompt(
        write(tmp_path, '=== i ===\nx\n=== user ===\nJSON {{"a": 1}} for {q}\n'), ["q"]
    )
    assert art.messages(art.components, {"q": "z"})[1]["content"] == 'JSON {"a": 1} for z'


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "=== i ===\nx\n=== user ===\nCountry: {land}\n",
            "prompt.md:3: placeholder {land} names no input column",
        ),
        ("=== i ===\nx\n=== i ===\ny\n", "prompt.md:3: section 'i' appears twice"),
        ("stray\n=== i ===\nx\n", "belongs to no section"),
        ("=== user ===\n{country}\n", "only a 'user' section"),
        ("   \n", "the prompt is empty"),
        ("=== i ===\nx\n=== user ===\n{country\n", "not a valid format string"),
    ],
)
def test_bad_prompts_name_file_line_and_fix(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as caught:
        load_prompt(write(tmp_path, text), ["country"])
    assert fragment in str(caught.value)


def test_render_round_trips(tmp_path):
    path = write(tmp_path, "=== a ===\nA\n=== b ===\nB\n=== user ===\nQ: {q}\n")
    art = load_prompt(path, ["q"])
    path.write_text(render_prompt(art, {"a": "A2", "b": "B2"}))
    again = load_prompt(path, ["q"])
    assert again.components == {"a": "A2", "b": "B2"} and again.user_template == "Q: {q}"
