"""dspy's tutorial "GEPA for AIME (Math)": a dspy.ChainOfThought optimized with dspy.GEPA, its
metric giving the written solution as feedback. tutorial.py is the tutorial's code as its authors
wrote it; skynet_port.py is the same script moved to Skynet: `diff tutorial.py skynet_port.py`
shows what changes. The data is a few rows of the fields the tutorial reads from the Hugging Face
hub (AI-MO/aimo-validation-aime, MathArena/aime_2025); the models are served by the
OpenAI-compatible server PORTS_API_BASE names. The budget is cut to run in seconds here: the
tutorial's auto="light" (about 400 metric calls on these rows) is max_metric_calls=30.

Moving it: dspy.configure(lm=...) is honoured as the task model as the tutorial sets it: its
model and api_base, and its temperature=1 and max_tokens=32000 as the run's [artifact]
temperature and max_tokens (artifact= would win). The reflection model is the tutorial's own
dspy.LM, given as models=dict(reflection=dspy.LM(...)): its model, temperature and max_tokens
are the run's reflection settings (recorded), its api_base and key reach the server (the key
held in memory, never recorded), as for every dspy.LM Skynet is handed.

Both scripts turn dspy's disk cache off (a line of the set-up, like the server's): its key
leaves out api_base, so runs on this loopback server would otherwise share answers through
~/.dspy_cache."""

# ruff: noqa: E402, F841  (the tutorial's code as its authors wrote it)

import os
import random

import dspy

API_BASE = os.environ.get("PORTS_API_BASE", "http://127.0.0.1:8000/v1")
os.environ.setdefault("OPENAI_API_KEY", "none")
os.environ.setdefault("OPENAI_API_BASE", API_BASE)
api_key = "none"  # the tutorial: input("Enter your OpenAI API key: ")
dspy.configure_cache(enable_disk_cache=False)  # runs here share no answers on disk

lm = dspy.LM(
    "openai/task-model", temperature=1, api_key=api_key, max_tokens=32000, api_base=API_BASE
)
dspy.configure(lm=lm)


def init_dataset():
    # The tutorial loads AI-MO/aimo-validation-aime (train and val) and MathArena/aime_2025
    # (test) with datasets.load_dataset; here a few rows with the same fields.
    pairs = [(12, 30), (100, 23), (7, 8), (250, 250), (61, 19), (3, 4), (40, 2), (9, 90)]
    train_split = [
        dspy.Example(
            {
                "problem": f"Find the sum of ${a}$ and ${b}$.",
                "solution": f"Adding the two numbers, ${a} + {b} = \\boxed{{{a + b}}}$.",
                "answer": str(a + b),
            }
        ).with_inputs("problem")
        for a, b in pairs
    ]
    random.Random(0).shuffle(train_split)
    tot_num = len(train_split)

    test_split = [
        dspy.Example(
            {"problem": f"Find the sum of ${a}$ and ${b}$.", "answer": str(a + b)}
        ).with_inputs("problem")
        for a, b in [(5, 6), (70, 7)]
    ]

    train_set = train_split[: int(0.5 * tot_num)]
    val_set = train_split[int(0.5 * tot_num) :]
    test_set = test_split * 5

    return train_set, val_set, test_set


train_set, val_set, test_set = init_dataset()


class GenerateResponse(dspy.Signature):
    """Solve the problem and provide the answer in the correct format."""

    problem = dspy.InputField()
    answer = dspy.OutputField()


program = dspy.ChainOfThought(GenerateResponse)


def metric(example, prediction, trace=None, pred_name=None, pred_trace=None):
    correct_answer = int(example["answer"])
    try:
        llm_answer = int(prediction.answer)
    except ValueError as e:
        return 0
    return int(correct_answer == llm_answer)


evaluate = dspy.Evaluate(
    devset=test_set, metric=metric, num_threads=32, display_table=True, display_progress=True
)

evaluate(program)


def metric_with_feedback(example, prediction, trace=None, pred_name=None, pred_trace=None):
    correct_answer = int(example["answer"])
    written_solution = example.get("solution", "")
    try:
        llm_answer = int(prediction.answer)
    except ValueError as e:
        feedback_text = f"The final answer must be a valid integer and nothing else. You responded with '{prediction.answer}', which couldn't be parsed as a python integer. Please ensure your answer is a valid integer without any additional text or formatting."
        feedback_text += f" The correct answer is '{correct_answer}'."
        if written_solution:
            feedback_text += f" Here's the full step-by-step solution:\n{written_solution}\n\nThink about what takeaways you can learn from this solution to improve your future answers and approach to similar problems and ensure your final answer is a valid integer."
        return dspy.Prediction(score=0, feedback=feedback_text)

    score = int(correct_answer == llm_answer)

    feedback_text = ""
    if score == 1:
        feedback_text = f"Your answer is correct. The correct answer is '{correct_answer}'."
    else:
        feedback_text = f"Your answer is incorrect. The correct answer is '{correct_answer}'."

    if written_solution:
        feedback_text += f" Here's the full step-by-step solution:\n{written_solution}\n\nThink about what takeaways you can learn from this solution to improve your future answers and approach to similar problems."

    return dspy.Prediction(score=score, feedback=feedback_text)


import skynet

optimized_program = skynet.optimize(
    program,
    metric=metric_with_feedback,
    train=train_set,
    val=val_set,
    engine={"name": "dspy-gepa", "concurrency": 32, "reflection_minibatch_size": 3},
    models=dict(reflection=dspy.LM(
        model="openai/reflection-model",
        temperature=1.0,
        max_tokens=32000,
        api_key=api_key,
        api_base=API_BASE,
    )),
    budget={"max_metric_calls": 30},
).best

print(optimized_program.predict.signature.instructions)

evaluate(optimized_program)
