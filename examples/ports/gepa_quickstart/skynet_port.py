"""gepa's README quickstart: optimize a system prompt for AIME-style math. tutorial.py is the
call as gepa's README writes it (gepa.optimize with its default adapter); skynet_port.py is the
same script moved to Skynet: `diff tutorial.py skynet_port.py` shows what changes. The data is a
few rows of the shape gepa.examples.aime.init_dataset() gives (that one reads AIME from the
Hugging Face hub); the models are served by the OpenAI-compatible server PORTS_API_BASE names."""

import os

import skynet

API_BASE = os.environ.get("PORTS_API_BASE", "http://127.0.0.1:8000/v1")
os.environ.setdefault("OPENAI_API_KEY", "none")
os.environ.setdefault("OPENAI_API_BASE", API_BASE)


def rows(n, offset):
    return [
        {
            "input": f"What is {i} + {42 - i}?",
            "additional_context": {"solution": f"{i} + {42 - i} = 42"},
            "answer": "### 42",
        }
        for i in range(offset, offset + n)
    ]


trainset, valset = rows(6, 0), rows(4, 10)

seed_prompt = {
    "system_prompt": "You are a helpful assistant. You are given a question and you need to "
    "answer it. The answer should be given at the end of your response in exactly the format "
    "'### <final answer>'"
}

gepa_result = skynet.optimize(
    seed_prompt,
    metric="contains",  # gepa's default adapter: the answer is in the response
    train=trainset,
    val=valset,
    models={"task": "openai/task-model", "reflection": "openai/reflection-model"},
    budget={"max_metric_calls": 30},
)

print("GEPA Optimized Prompt:", gepa_result.best_candidate["system_prompt"])
