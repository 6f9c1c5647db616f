"""Artifacts: what is being optimized, and how it runs on one item (prompt; dspy and code next)."""

from skynet.artifacts.prompt import PromptArtifact, load_prompt, render_prompt

__all__ = ["PromptArtifact", "load_prompt", "render_prompt"]
