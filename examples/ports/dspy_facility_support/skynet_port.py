"""dspy's tutorial "GEPA for Structured Information Extraction for Enterprise Tasks" (the
Facility Support Analyzer): a three-module program (urgency, sentiment, categories), each a
dspy.ChainOfThought, optimized with dspy.GEPA; the metric gives each predictor its own feedback
(pred_name). tutorial.py is the tutorial's code as its authors wrote it; skynet_port.py is the
same script moved to Skynet: `diff tutorial.py skynet_port.py` shows what changes. The data is a
few messages in the shape of Meta's dataset.json (which the tutorial downloads); the models are
served by the OpenAI-compatible server PORTS_API_BASE names. The budget is cut to run in seconds
here: the tutorial's auto="light" (about 1,100 metric calls) is max_metric_calls=60.

Moving it:
- dspy.configure(lm=...) is honoured as the task model as the tutorial sets it: its model and
  api_base, and its temperature=1 as the run's [artifact] temperature; its max_tokens (none: the
  provider's) is [artifact] max_tokens (256 by default).
- The metric's self-test checks its return value on an empty output of the program's fields:
  the example's label (`answer`, a JSON string) is none of the program's outputs, so there is
  no answer key to score, and `skynet.optimize` says so in one line.
- The tutorial's "Bonus: Detailed Results" (a Graphviz DAG drawn from
  optimized_program.detailed_results) runs unchanged: the best program skynet.optimize returns
  carries dspy.GEPA's detailed_results (track_stats=True), candidates and val items named by
  their positions as there (RunResult.detailed_results names them by id).
- The reflection model is the tutorial's own dspy.LM, given as models=dict(reflection=...): its
  model, temperature and max_tokens are the run's reflection settings (recorded), its api_base
  and key reach the server (the key held in memory, never recorded), as for every dspy.LM
  Skynet is handed.

Both scripts turn dspy's disk cache off (a line of the set-up, like the server's): its key
leaves out api_base, so runs on this loopback server would otherwise share answers through
~/.dspy_cache."""

# ruff: noqa: E402, UP006, UP035, SIM114  (the tutorial's code as its authors wrote it)

import os

import dspy

API_BASE = os.environ.get("PORTS_API_BASE", "http://127.0.0.1:8000/v1")
os.environ.setdefault("OPENAI_API_KEY", "none")
os.environ.setdefault("OPENAI_API_BASE", API_BASE)
api_key = "none"  # the tutorial: input("Enter your OpenAI API key: ")
dspy.configure_cache(enable_disk_cache=False)  # runs here share no answers on disk

lm = dspy.LM("openai/task-model", temperature=1, api_key=api_key, api_base=API_BASE)
dspy.configure(lm=lm)

import json
import random

CATEGORIES = [
    "emergency_repair_services",
    "routine_maintenance_requests",
    "quality_and_safety_concerns",
    "specialized_cleaning_services",
    "general_inquiries",
    "sustainability_and_environmental_practices",
    "training_and_support_requests",
    "cleaning_services_scheduling",
    "customer_feedback_and_complaints",
    "facility_management_issues",
]

MESSAGES = [  # (message, urgency, sentiment, categories)
    (
        "Water is leaking from the ceiling of our server room, please come immediately.",
        "high",
        "negative",
        ["emergency_repair_services"],
    ),
    (
        "Could we move the office cleaning schedule to Tuesdays? Thank you, the team is great.",
        "low",
        "positive",
        ["cleaning_services_scheduling"],
    ),
    (
        "The lobby was left dirty again this week. This is unacceptable and I am disappointed.",
        "medium",
        "negative",
        ["customer_feedback_and_complaints"],
    ),
    (
        "Do you offer eco-friendly cleaning products? Just asking for our green policy.",
        "low",
        "neutral",
        ["sustainability_and_environmental_practices"],
    ),
    (
        "A pipe burst in the basement and it is flooding, we need someone immediately.",
        "high",
        "negative",
        ["emergency_repair_services"],
    ),
    (
        "Our staff would like training on the new floor machines. Thank you for the help.",
        "low",
        "positive",
        ["training_and_support_requests"],
    ),
    (
        "Please reschedule Friday's cleaning to Monday.",
        "low",
        "neutral",
        ["cleaning_services_scheduling"],
    ),
    (
        "The elevator inspection is overdue; the building manager needs it done soon.",
        "medium",
        "neutral",
        ["facility_management_issues"],
    ),
    ("What are your opening hours during the holidays?", "low", "neutral", ["general_inquiries"]),
]


def init_dataset():
    # The tutorial downloads Meta's facility-support-analyzer dataset.json with requests; here
    # a few records of the same shape.
    dataset = [
        {
            "fields": {"input": message},
            "answer": json.dumps(
                {
                    "categories": {c: c in categories for c in CATEGORIES},
                    "sentiment": sentiment,
                    "urgency": urgency,
                }
            ),
        }
        for message, urgency, sentiment, categories in MESSAGES
    ]
    dspy_dataset = [
        dspy.Example(
            {
                "message": d["fields"]["input"],
                "answer": d["answer"],
            }
        ).with_inputs("message")
        for d in dataset
    ]
    random.Random(0).shuffle(dspy_dataset)
    train_set = dspy_dataset[: int(len(dspy_dataset) * 0.33)]
    val_set = dspy_dataset[int(len(dspy_dataset) * 0.33) : int(len(dspy_dataset) * 0.66)]
    test_set = dspy_dataset[int(len(dspy_dataset) * 0.66) :]

    return train_set, val_set, test_set


train_set, val_set, test_set = init_dataset()

from typing import List, Literal


class FacilitySupportAnalyzerUrgency(dspy.Signature):
    """
    Read the provided message and determine the urgency.
    """

    message: str = dspy.InputField()
    urgency: Literal["low", "medium", "high"] = dspy.OutputField()


class FacilitySupportAnalyzerSentiment(dspy.Signature):
    """
    Read the provided message and determine the sentiment.
    """

    message: str = dspy.InputField()
    sentiment: Literal["positive", "neutral", "negative"] = dspy.OutputField()


class FacilitySupportAnalyzerCategories(dspy.Signature):
    """
    Read the provided message and determine the set of categories applicable to the message.
    """

    message: str = dspy.InputField()
    categories: List[
        Literal[
            "emergency_repair_services",
            "routine_maintenance_requests",
            "quality_and_safety_concerns",
            "specialized_cleaning_services",
            "general_inquiries",
            "sustainability_and_environmental_practices",
            "training_and_support_requests",
            "cleaning_services_scheduling",
            "customer_feedback_and_complaints",
            "facility_management_issues",
        ]
    ] = dspy.OutputField()


class FacilitySupportAnalyzerMM(dspy.Module):
    def __init__(self):
        self.urgency_module = dspy.ChainOfThought(FacilitySupportAnalyzerUrgency)
        self.sentiment_module = dspy.ChainOfThought(FacilitySupportAnalyzerSentiment)
        self.categories_module = dspy.ChainOfThought(FacilitySupportAnalyzerCategories)

    def forward(self, message: str):
        urgency = self.urgency_module(message=message)
        sentiment = self.sentiment_module(message=message)
        categories = self.categories_module(message=message)

        return dspy.Prediction(
            urgency=urgency.urgency,
            sentiment=sentiment.sentiment,
            categories=categories.categories,
        )


program = FacilitySupportAnalyzerMM()


def score_urgency(gold_urgency, pred_urgency):
    """
    Compute score for the urgency module.
    """
    score = 1.0 if gold_urgency == pred_urgency else 0.0
    return score


def score_sentiment(gold_sentiment, pred_sentiment):
    """
    Compute score for the sentiment module.
    """
    score = 1.0 if gold_sentiment == pred_sentiment else 0.0
    return score


def score_categories(gold_categories, pred_categories):
    """
    Compute score for the categories module.
    Uses the same match/mismatch logic as category accuracy in the score.
    """
    correct = 0
    for k, v in gold_categories.items():
        if v and k in pred_categories:
            correct += 1
        elif not v and k not in pred_categories:
            correct += 1
    score = correct / len(gold_categories)
    return score


def metric(example, pred, trace=None, pred_name=None, pred_trace=None):
    """
    Computes a score based on agreement between prediction and gold standard for categories, sentiment, and urgency.
    Returns the score (float).
    """
    # Parse gold standard from example
    gold = json.loads(example["answer"])

    # Compute scores for all modules
    score_urgency_val = score_urgency(gold["urgency"], pred.urgency)
    score_sentiment_val = score_sentiment(gold["sentiment"], pred.sentiment)
    score_categories_val = score_categories(gold["categories"], pred.categories)

    # Overall score: average of the three accuracies
    total = (score_urgency_val + score_sentiment_val + score_categories_val) / 3

    return total


evaluate = dspy.Evaluate(
    devset=test_set, metric=metric, num_threads=32, display_table=True, display_progress=True
)

evaluate(program)


def feedback_urgency(gold_urgency, pred_urgency):
    """
    Generate feedback for the urgency module.
    """
    score = 1.0 if gold_urgency == pred_urgency else 0.0
    if gold_urgency == pred_urgency:
        feedback = f"You correctly classified the urgency of the message as `{gold_urgency}`. This message is indeed of `{gold_urgency}` urgency."
    else:
        feedback = f"You incorrectly classified the urgency of the message as `{pred_urgency}`. The correct urgency is `{gold_urgency}`. Think about how you could have reasoned to get the correct urgency label."
    return feedback, score


def feedback_sentiment(gold_sentiment, pred_sentiment):
    """
    Generate feedback for the sentiment module.
    """
    score = 1.0 if gold_sentiment == pred_sentiment else 0.0
    if gold_sentiment == pred_sentiment:
        feedback = f"You correctly classified the sentiment of the message as `{gold_sentiment}`. This message is indeed `{gold_sentiment}`."
    else:
        feedback = f"You incorrectly classified the sentiment of the message as `{pred_sentiment}`. The correct sentiment is `{gold_sentiment}`. Think about how you could have reasoned to get the correct sentiment label."
    return feedback, score


def feedback_categories(gold_categories, pred_categories):
    """
    Generate feedback for the categories module.
    Uses the same match/mismatch logic as category accuracy in the score.
    """
    correctly_included = [k for k, v in gold_categories.items() if v and k in pred_categories]
    incorrectly_included = [k for k, v in gold_categories.items() if not v and k in pred_categories]
    incorrectly_excluded = [k for k, v in gold_categories.items() if v and k not in pred_categories]
    correctly_excluded = [
        k for k, v in gold_categories.items() if not v and k not in pred_categories
    ]  # For completeness in accuracy check

    # Recompute category accuracy (matches score logic)
    score = (len(correctly_included) + len(correctly_excluded)) / len(gold_categories)

    if score == 1.0:
        fb_text = f"The category classification is perfect. You correctly identified that the message falls under the following categories: `{repr(correctly_included)}`."
    else:
        fb_text = f"The category classification is not perfect. You correctly identified that the message falls under the following categories: `{repr(correctly_included)}`.\n"
        if incorrectly_included:
            fb_text += f"However, you incorrectly identified that the message falls under the following categories: `{repr(incorrectly_included)}`. The message DOES NOT fall under these categories.\n"
        if incorrectly_excluded:
            prefix = "Additionally, " if incorrectly_included else "However, "
            fb_text += f"{prefix}you didn't identify the following categories that the message actually falls under: `{repr(incorrectly_excluded)}`.\n"
        fb_text += "Think about how you could have reasoned to get the correct category labels."
    return fb_text, score


def metric_with_feedback(example, pred, trace=None, pred_name=None, pred_trace=None):
    """
    Computes a score based on agreement between prediction and gold standard for categories, sentiment, and urgency.
    Optionally provides feedback text for a specific predictor module, using the same comparison logic as the score.
    Returns a dspy.Prediction with score (float) and feedback (str).
    """
    # Parse gold standard from example
    gold = json.loads(example["answer"])

    # Compute feedback and scores for all modules
    fb_urgency, score_urgency = feedback_urgency(gold["urgency"], pred.urgency)
    fb_sentiment, score_sentiment = feedback_sentiment(gold["sentiment"], pred.sentiment)
    fb_categories, score_categories = feedback_categories(gold["categories"], pred.categories)

    # Overall score: average of the three accuracies
    total = (score_urgency + score_sentiment + score_categories) / 3

    if pred_name is None:
        return total

    elif pred_name == "urgency_module.predict":
        feedback = fb_urgency
    elif pred_name == "sentiment_module.predict":
        feedback = fb_sentiment
    elif pred_name == "categories_module.predict":
        feedback = fb_categories

    return dspy.Prediction(score=total, feedback=feedback)


import skynet

# Let's run GEPA
optimized_program = skynet.optimize(
    program,
    metric=metric_with_feedback,
    train=train_set,
    val=val_set,
    engine={"name": "dspy-gepa", "concurrency": 32, "options": {"use_merge": False}},
    models=dict(reflection=dspy.LM(
        model="openai/reflection-model",
        temperature=1.0,
        max_tokens=32000,
        api_key=api_key,
        api_base=API_BASE,
    )),
    budget={"max_metric_calls": 60},
).best

for name, pred in optimized_program.named_predictors():
    print("================================")
    print(f"Predictor: {name}")
    print("================================")
    print("Prompt:")
    print(pred.signature.instructions)
    print("*********************************")

evaluate(optimized_program)

# Bonus: Detailed Results
# A GEPA run with `track_stats=True` returns detailed results in the `detailed_results`
# attribute; the trajectory is drawn as a Graphviz DOT graph.


def dag_to_dot(
    parent_program_for_candidate, dominator_program_ids, best_program_idx, full_eval_scores
):
    dot_lines = ["digraph G {", "    node [style=filled, shape=circle, fontsize=50];"]
    n = len(parent_program_for_candidate)
    # Set up nodes with colors and scores in labels
    for idx in range(n):
        score = full_eval_scores[idx]
        label = f"{idx}\\n({score:.2f})"
        if idx == best_program_idx:
            dot_lines.append(f'    {idx} [label="{label}", fillcolor=cyan, fontcolor=black];')
        elif idx in dominator_program_ids:
            dot_lines.append(f'    {idx} [label="{label}", fillcolor=orange, fontcolor=black];')
        else:
            dot_lines.append(f'    {idx} [label="{label}"];')

    # Set up edges
    for child, parents in enumerate(parent_program_for_candidate):
        for parent in parents:
            if parent is not None:
                dot_lines.append(f"    {parent} -> {child};")

    dot_lines.append("}")
    return "\n".join(dot_lines)


from gepa.gepa_utils import find_dominator_programs

pareto_front_programs = find_dominator_programs(
    optimized_program.detailed_results.per_val_instance_best_candidates,
    optimized_program.detailed_results.val_aggregate_scores,
)

print(
    dag_to_dot(
        optimized_program.detailed_results.parents,
        pareto_front_programs,
        optimized_program.detailed_results.best_idx,
        optimized_program.detailed_results.val_aggregate_scores,
    )
)
