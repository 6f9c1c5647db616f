"""[judge] in skynet.toml: the LLM judge `metric = "judge"` scores with, and what its validation
record must show before it may."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from skynet.config import Float, Int, Section

__all__ = ["JudgeSection", "JudgeThresholdsConfig"]


class JudgeThresholdsConfig(Section):
    """[judge.thresholds]: what a validation record must show before the judge may score."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_n: Int = Field(default=30, ge=1, description="an integer >= 1 (labelled items)")
    min_accuracy: Float | None = Field(
        default=0.8, ge=0, le=1, description="a number in [0, 1] (agreement with the labels)"
    )
    min_kappa: Float | None = Field(
        default=0.6, ge=-1, le=1, description="a number in [-1, 1] (Cohen's kappa)"
    )
    min_tpr: Float | None = Field(default=None, ge=0, le=1, description="a number in [0, 1]")
    min_tnr: Float | None = Field(default=None, ge=0, le=1, description="a number in [0, 1]")
    min_balanced_accuracy: Float | None = Field(
        default=None, ge=0, le=1, description="a number in [0, 1]"
    )
    bound: Literal["estimate", "low"] = Field(
        default="estimate",
        description='"estimate" (hold the point estimates) or "low" (their intervals\' low ends)',
    )


class JudgeSection(Section):
    """[judge]: the LLM judge `metric = "judge"` scores with, and its validation record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(
        default="", description='a litellm model name, or "" for the metric (else reflection) model'
    )
    instructions: str = Field(
        min_length=1, description='what the judge checks, e.g. "Is the output the same city?"'
    )
    mode: Literal["grade"] = Field(default="grade", description='"grade"')
    grades: list[str] = Field(
        default_factory=lambda: ["pass", "fail"],
        min_length=2,
        description='a list of single words, e.g. ["pass", "fail"]',
    )
    positive: str = Field(default="pass", description='the grade that means right, e.g. "pass"')
    orders: list[Literal["reference-first", "output-first"]] = Field(
        default_factory=lambda: ["reference-first", "output-first"],
        min_length=1,
        description='a list of "reference-first" and/or "output-first"',
    )
    label: str | None = Field(
        default=None, description="the output column holding the label (when there are several)"
    )
    validation: str = Field(
        default="judge-validation.json",
        min_length=1,
        description='the validation record\'s path, e.g. "judge-validation.json"',
    )
    temperature: Float = Field(default=0.0, ge=0, le=2, description="a number in [0, 2]")
    max_tokens: Int = Field(default=64, ge=1, description="an integer >= 1")
    thresholds: JudgeThresholdsConfig = Field(
        default_factory=JudgeThresholdsConfig, description="a [judge.thresholds] table"
    )
