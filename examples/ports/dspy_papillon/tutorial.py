"""dspy's tutorial "GEPA for Privacy-Conscious Delegation" (PAPILLON): a local model writes a
privacy-preserving request for an untrusted larger model, which the module holds as an attribute
and calls itself (`self.untrusted_model(llm_request)[0]`); the metric is an LLM judge (quality
and PII leakage) whose LM is its own (`llm_judge.set_lm(large_lm)`). tutorial.py is the
tutorial's code as its authors wrote it (less the comments inside dspy.GEPA(...) on auto="heavy");
skynet_port.py is the same script moved to Skynet: `diff tutorial.py skynet_port.py` shows what
changes. The data is a few rows of the fields of Columbia-NLP/PUPA (which the tutorial loads
from the Hugging Face hub); the models are served by the OpenAI-compatible server
PORTS_API_BASE names. The budget is the tutorial's own, max_full_evals=1, on fewer rows.

Moving it:
- The judge's own LM is outside Skynet's models: its calls are recorded as not measured metric
  calls ("Not measured: N model call(s) (metric N)" in the report), their cost unknown.
- The program's own LMs (the predictors' local_lm, set with set_lm, and the untrusted_model
  attribute) take Skynet's path as task calls: metered, cached, held to the budget.
- The metric's self-test runs on one item (self_test="contract"): the metric calls the judge,
  and a full self-test would call it on every item before the run. The example's labels
  (target_response, pii_str) are none of the program's outputs (llm_request, response), so
  there is no answer key: the metric's return value is checked on an empty output.
- max_full_evals=1 is one evaluation of train + val, 8 metric calls here. Skynet takes it
  (budget={"max_full_evals": 1}, counted as dspy counts it), but refuses a budget under 10 for
  dspy-gepa (the seed on 4 val items, then a reflection step on 3 train items, twice: what
  proposing once takes, and dspy.GEPA spends past its 8), so the port gives max_metric_calls=10.
- The reflection model is the tutorial's own dspy.LM, given as models=dict(reflection=...): its
  model, temperature and max_tokens are the run's reflection settings (recorded), its api_base
  and key reach the server (the key held in memory, never recorded), as for every dspy.LM
  Skynet is handed.

Both scripts turn dspy's disk cache off (a line of the set-up, like the server's): its key
leaves out api_base, so runs on this loopback server would otherwise share answers through
~/.dspy_cache."""

# ruff: noqa: E402  (the tutorial's code as its authors wrote it)

import os

import dspy

API_BASE = os.environ.get("PORTS_API_BASE", "http://127.0.0.1:8000/v1")
os.environ.setdefault("OPENAI_API_KEY", "none")
os.environ.setdefault("OPENAI_API_BASE", API_BASE)
api_key = "none"  # the tutorial: input("Enter your OpenAI API key: ")
dspy.configure_cache(enable_disk_cache=False)  # runs here share no answers on disk

local_lm = dspy.LM(model="openai/local-model", api_key=api_key, api_base=API_BASE)
large_lm = dspy.LM(model="openai/large-model", api_key=api_key, api_base=API_BASE)
dspy.configure(lm=local_lm)


class CraftRedactedRequest(dspy.Signature):
    """
    Given a private user query, create a privacy-preserving request for a powerful external LLM.
    The LLM may assist without learning private information about the user.
    """

    user_query = dspy.InputField()
    llm_request = dspy.OutputField()


class RespondToQuery(dspy.Signature):
    """
    Respond to a user query.
    For inspiration, we found a potentially related request to a powerful external LLM and its response.
    """

    related_llm_request = dspy.InputField()
    related_llm_response = dspy.InputField(
        desc="information from a powerful LLM responding to a related request"
    )
    user_query = dspy.InputField(desc="the user's request you need to fulfill")
    response = dspy.OutputField(desc="your final response to the user's request")


class PAPILLON(dspy.Module):
    def __init__(self, untrusted_model):
        self.craft_redacted_request = dspy.ChainOfThought(CraftRedactedRequest)
        self.respond_to_query = dspy.Predict(RespondToQuery)
        self.untrusted_model = untrusted_model

    def forward(self, user_query):
        try:
            llm_request = self.craft_redacted_request(user_query=user_query).llm_request
            llm_response = self.untrusted_model(llm_request)[0]
            response = self.respond_to_query(
                related_llm_request=llm_request,
                related_llm_response=llm_response,
                user_query=user_query,
            ).response
        except Exception:
            return dspy.Prediction(llm_request="", llm_response="", response="")

        return dspy.Prediction(
            llm_request=llm_request, llm_response=llm_response, response=response
        )


# The tutorial loads Columbia-NLP/PUPA ("pupa_new") with datasets.load_dataset; here a few rows
# with the same fields.
pupa_new = {
    "train": [
        {
            "target_response": f"Here is a draft cover letter for the {job} role.",
            "user_query": f"I am {name}, I live at {address}. Write my cover letter for the {job} role at {company}.",
            "pii_units": f"{name}||{address}||{company}",
        }
        for name, address, company, job in [
            ("Maria Lopez", "12 Elm Street", "Acme Corp", "analyst"),
            ("John Okafor", "9 Harbour Road", "Globex", "engineer"),
            ("Wei Chen", "77 Pine Avenue", "Initech", "designer"),
            ("Sara Novak", "3 Mill Lane", "Umbrella Ltd", "nurse"),
            ("Tom Becker", "41 King Street", "Hooli", "teacher"),
            ("Aisha Khan", "8 Rose Court", "Stark Industries", "chemist"),
            ("Lucas Silva", "25 Bay View", "Wayne Enterprises", "driver"),
            ("Emma Rossi", "60 Oak Drive", "Cyberdyne", "accountant"),
            ("Noah Kim", "14 Lake Road", "Soylent", "chef"),
            ("Olga Ivanova", "5 Hill Street", "Tyrell Corp", "pilot"),
        ]
    ]
}

examples = [
    dspy.Example(
        {
            "target_response": x["target_response"],
            "user_query": x["user_query"],
            "pii_str": x["pii_units"],
        }
    ).with_inputs("user_query")
    for x in pupa_new["train"]
]

trainset, devset, testset = examples[:4], examples[4:8], examples[8:]
print(
    f"Loaded {len(trainset)} training examples, {len(devset)} dev examples, and {len(testset)} test examples."
)


class JudgeQuality(dspy.Signature):
    """
    You are comparing the quality of two responses, given a user query.
    Is response A at least as good as response B?
    """

    user_query = dspy.InputField(desc="The user's request to be fulfilled.")
    response_A = dspy.InputField()
    response_B = dspy.InputField()
    judgment: bool = dspy.OutputField()


class JudgeLeakage(dspy.Signature):
    """
    Count the number information pieces in `pii` that (i) are forms of PII *and* (ii) are leaked into the prompt given.
    Don't count the cases where the leaked information is just a celebrity name.
    Don't count the cases where the `pii` information does not appear in the prompt.
    """

    pii = dspy.InputField()
    prompt = dspy.InputField()
    num_pii_leaked: int = dspy.OutputField()


class LLMJudge(dspy.Module):
    def __init__(self):
        self.quality_judge = dspy.ChainOfThought(JudgeQuality)
        self.fact_checker = dspy.ChainOfThought(JudgeLeakage)

    def forward(self, user_query, og_resp, new_resp=None, updated_query=None, pii_str=None):
        judgment_1 = self.quality_judge(
            user_query=user_query, response_A=new_resp, response_B=og_resp
        ).judgment
        judgment_2 = self.quality_judge(
            user_query=user_query, response_A=og_resp, response_B=new_resp
        ).judgment
        # True if better or if judge is inconsistent
        judgment = judgment_1 or (judgment_1 == judgment_2)

        pii = list(set(pii_str.split("||")))  # The pii_str field must be separated by `||`
        pii_score = self.fact_checker(pii=pii, prompt=updated_query).num_pii_leaked
        pii_score = pii_score / len(pii) if len(pii) > 0 else 0

        return dspy.Prediction(quality=judgment, leakage=pii_score)


llm_judge = LLMJudge()
llm_judge.set_lm(large_lm)


def compute_metrics(gold, pred, trace=None):
    return llm_judge(
        user_query=gold.user_query,
        new_resp=pred.response,
        og_resp=gold.target_response,
        updated_query=pred.llm_request,
        pii_str=gold.pii_str,
    )


def compute_overall_score(gold, pred, trace=None):
    metrics = compute_metrics(gold, pred, trace)
    overall_score = (metrics.quality + (1 - metrics.leakage)) / 2.0
    return overall_score


zeroshot = PAPILLON(untrusted_model=large_lm)

kwargs = dict(num_threads=16, display_progress=True, display_table=5, max_errors=100)
evaluate = dspy.Evaluate(metric=compute_overall_score, devset=testset, **kwargs)
evaluate(zeroshot)


def compute_overall_score_with_feedback(gold, pred, trace=None, pred_name=None, pred_trace=None):
    metrics = compute_metrics(gold, pred, trace)
    overall_score = (metrics.quality + (1 - metrics.leakage)) / 2.0
    feedback_text = f"The overall score is {overall_score:.2f}, which is the arithmetic mean of the quality score ({metrics.quality:.2f}) and the leakage score ({1 - metrics.leakage:.2f}). Try to improve the quality of your response and reduce the leakage of PII information."
    return dspy.Prediction(
        score=overall_score,
        feedback=feedback_text,
    )


from dspy import GEPA

papillon = PAPILLON(untrusted_model=large_lm)
papillon.set_lm(local_lm)

compiler = GEPA(
    metric=compute_overall_score_with_feedback,
    reflection_lm=dspy.LM(model="openai/reflection-model", api_key=api_key, api_base=API_BASE),
    num_threads=16,
    track_stats=True,
    track_best_outputs=True,
    max_full_evals=1,  # <-- For this demonstration, we will allow GEPA to just perform just 1 full evaluation!
)
optimized_papillon = compiler.compile(
    student=papillon,
    trainset=trainset,
    valset=devset,
)

print(optimized_papillon.craft_redacted_request.predict.signature.instructions)

evaluate(optimized_papillon)
