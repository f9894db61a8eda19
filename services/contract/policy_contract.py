"""The Policy contract (proto/rlanything/v1/policy.proto, and the OpenAI-compatible endpoint), as
clauses run against any server. The trainer and the critic rely on these:

1. Generate answers one completion per prompt, in order, with a model version; each completion's
   ``logprobs`` (behaviour log-probs, nats ≤ 0) has one entry per token id (or none at all, for a
   backend without token access), at most ``max_new_tokens`` tokens, a finish reason stop|length.
2. The same prompt gives the same ``prompt_token_ids``; greedy decoding (temperature 0) gives the
   same tokens twice.
3. Malformed requests are INVALID_ARGUMENT: no prompts, an unknown role, a negative temperature.
4. (With an OpenAI base URL) ``POST /chat/completions`` answers with choices, usage whose
   completion_tokens equals the log-probs' count when ``logprobs`` is asked; ``GET /models`` lists
   models; malformed JSON is a 4xx with an OpenAI-style ``{"error": {"message", "type"}}`` body.
5. (Where the server streams; UNIMPLEMENTED holds vacuously) GenerateStream of one prompt at
   temperature 0 sends chunks whose tokens, log-probs and texts concatenated are those of its last
   chunk's completion, the only chunk that holds one; those tokens are Generate's greedy tokens; a
   batch of two prompts is INVALID_ARGUMENT.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import httpx
from rlanything.v1 import policy_pb2, policy_pb2_grpc
from rlanything.v1.events_pb2 import SamplingParams

from services.contract.clauses import ClauseFailed, Result, call, refused, run_clauses, show

__all__ = ["check_policy", "CLAUSES"]

MAX_NEW = 8


def _chat(*turns: tuple[str, str]) -> policy_pb2.Conversation:
    return policy_pb2.Conversation(messages=[policy_pb2.ChatMessage(role=r, content=c) for r, c in turns])


PROMPTS = [_chat(("user", "Move left or right? Answer \\boxed{1} or \\boxed{2}.")),
           _chat(("system", "Answer briefly."), ("user", "Name a colour.")),
           _chat(("user", "Count to three."), ("assistant", "1, 2,"), ("user", "Go on."))]


@dataclass
class _Run:
    stub: policy_pb2_grpc.PolicyStub
    openai_url: str
    timeout_s: float


def _generate(run: _Run, temperature: float) -> tuple[policy_pb2.GenerateRequest, policy_pb2.GenerateResponse]:
    request = policy_pb2.GenerateRequest(prompts=PROMPTS, sampling=SamplingParams(
        temperature=temperature, top_p=1.0, max_new_tokens=MAX_NEW, seed=3))
    return request, call(run.stub.Generate, request, run.timeout_s)


def one_completion_per_prompt(run: _Run) -> None:
    request, response = _generate(run, 0.8)
    if len(response.completions) != len(PROMPTS):
        raise ClauseFailed(show(request), f"{len(response.completions)} completions: {show(response)}",
                           f"one completion per prompt ({len(PROMPTS)}), in order")
    if response.model_version < 0:
        raise ClauseFailed(show(request), show(response), "model_version >= 0")
    for i, c in enumerate(response.completions):
        if c.logprobs and len(c.logprobs) != len(c.token_ids):
            raise ClauseFailed(show(request), f"completion {i}: {len(c.token_ids)} token ids, {len(c.logprobs)} logprobs",
                               "one behaviour log-prob per token id (or none)")
        if any(lp > 1e-4 for lp in c.logprobs):
            raise ClauseFailed(show(request), f"completion {i}: logprobs {list(c.logprobs)[:8]}",
                               "log-probabilities <= 0 (nats)")
        if len(c.token_ids) > MAX_NEW:
            raise ClauseFailed(show(request), f"completion {i}: {len(c.token_ids)} tokens",
                               f"at most max_new_tokens={MAX_NEW} tokens")
        if c.finish_reason not in ("stop", "length"):
            raise ClauseFailed(show(request), f"completion {i}: finish_reason {c.finish_reason!r}",
                               "finish_reason 'stop' or 'length'")


def deterministic_where_it_must_be(run: _Run) -> None:
    request, first = _generate(run, 0.0)
    _, second = _generate(run, 0.0)
    for i, (a, b) in enumerate(zip(first.completions, second.completions)):
        if list(a.prompt_token_ids) != list(b.prompt_token_ids):
            raise ClauseFailed(show(request) + " (twice)", f"prompt {i}: {list(a.prompt_token_ids)[:12]} then "
                               f"{list(b.prompt_token_ids)[:12]}", "the same prompt_token_ids for the same prompt")
        if list(a.token_ids) != list(b.token_ids) or a.text != b.text:
            raise ClauseFailed(show(request) + " (twice)", f"prompt {i}: {a.text!r} then {b.text!r}",
                               "the same tokens twice at temperature 0 (greedy)")


def refuses_malformed_requests(run: _Run) -> None:
    ia = {grpc.StatusCode.INVALID_ARGUMENT}
    refused(run.stub.Generate, policy_pb2.GenerateRequest(), ia, "INVALID_ARGUMENT for a request without prompts",
            run.timeout_s)
    refused(run.stub.Generate, policy_pb2.GenerateRequest(prompts=[_chat(("robot", "hi"))]), ia,
            "INVALID_ARGUMENT for an unknown role", run.timeout_s)
    refused(run.stub.Generate, policy_pb2.GenerateRequest(prompts=PROMPTS[:1], sampling=SamplingParams(temperature=-1)),
            ia, "INVALID_ARGUMENT for a negative temperature", run.timeout_s)


def openai_endpoint(run: _Run) -> None:
    if not run.openai_url:
        return  # not asked: the clause holds vacuously (the CLI says so)
    base = run.openai_url.rstrip("/")
    with httpx.Client(timeout=run.timeout_s) as http:
        models = http.get(f"{base}/models")
        names = [m.get("id") for m in models.json().get("data", [])] if models.status_code == 200 else []
        if not names:
            raise ClauseFailed(f"GET {base}/models", f"{models.status_code}: {models.text[:300]}", "a list of models")
        body = {"model": names[0], "messages": [{"role": "user", "content": "Say yes."}], "max_tokens": MAX_NEW,
                "temperature": 0, "logprobs": True}
        reply = http.post(f"{base}/chat/completions", json=body)
        data = reply.json() if reply.headers.get("content-type", "").startswith("application/json") else {}
        choices = data.get("choices") or []
        if reply.status_code != 200 or not choices or "content" not in (choices[0].get("message") or {}):
            raise ClauseFailed(f"POST {base}/chat/completions {body}", f"{reply.status_code}: {reply.text[:300]}",
                               "200 with choices[0].message.content")
        content = (choices[0].get("logprobs") or {}).get("content") or []
        used = (data.get("usage") or {}).get("completion_tokens")
        if used != len(content):
            raise ClauseFailed(f"POST {base}/chat/completions {body}", f"usage.completion_tokens {used}, "
                               f"{len(content)} log-probs", "usage.completion_tokens = the number of log-probs")
        bad = http.post(f"{base}/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
        error = bad.json().get("error") if bad.headers.get("content-type", "").startswith("application/json") else None
        if not 400 <= bad.status_code < 500 or not isinstance(error, dict) or not {"message", "type"} <= set(error):
            raise ClauseFailed(f"POST {base}/chat/completions with body '{{not json'", f"{bad.status_code}: {bad.text[:300]}",
                               'a 4xx with an OpenAI-style body {"error": {"message": ..., "type": ...}}')


def streams_what_generate_answers(run: _Run) -> None:
    request = policy_pb2.GenerateRequest(prompts=PROMPTS[:1], sampling=SamplingParams(
        temperature=0.0, top_p=1.0, max_new_tokens=MAX_NEW))
    try:
        chunks = list(run.stub.GenerateStream(request, timeout=run.timeout_s))
    except grpc.RpcError as err:
        if err.code() == grpc.StatusCode.UNIMPLEMENTED:
            return  # the server does not stream: optional
        raise ClauseFailed(show(request), f"{err.code().name}: {err.details()}", "a stream of chunks (status OK)") \
            from None
    sent = f"GenerateStream {show(request)}"
    finals = [i for i, c in enumerate(chunks) if c.HasField("completion")]
    if finals != [len(chunks) - 1]:
        raise ClauseFailed(sent, f"{len(chunks)} chunks, completion in chunks {finals}",
                           "exactly one chunk with the completion, the last")
    last = chunks[-1].completion
    tokens = [t for c in chunks for t in c.token_ids]
    logprobs = [lp for c in chunks for lp in c.logprobs]
    text = "".join(c.text for c in chunks)
    if tokens != list(last.token_ids) or len(logprobs) != len(tokens) or text != last.text:
        raise ClauseFailed(sent, f"chunks: {len(tokens)} tokens, {len(logprobs)} logprobs, text {text!r}; completion: "
                           f"{len(last.token_ids)} tokens, text {last.text!r}",
                           "the chunks' tokens, log-probs (one per token) and texts concatenated = the completion's")
    unary = call(run.stub.Generate, request, run.timeout_s)
    if list(unary.completions[0].token_ids) != tokens:
        raise ClauseFailed(sent, f"streamed {tokens[:12]}, Generate {list(unary.completions[0].token_ids)[:12]}",
                           "the same greedy tokens as Generate")
    batch = policy_pb2.GenerateRequest(prompts=PROMPTS[:2], sampling=request.sampling)
    try:
        list(run.stub.GenerateStream(batch, timeout=run.timeout_s))
    except grpc.RpcError as err:
        if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
            return
        raise ClauseFailed(f"GenerateStream {show(batch)}", f"{err.code().name}: {err.details()}",
                           "INVALID_ARGUMENT for two prompts") from None
    raise ClauseFailed(f"GenerateStream {show(batch)}", "OK", "INVALID_ARGUMENT for two prompts")


CLAUSES = [
    ("1. Generate answers one well-formed completion per prompt", one_completion_per_prompt),
    ("2. Same prompt, same prompt ids; greedy is deterministic", deterministic_where_it_must_be),
    ("3. Malformed requests are INVALID_ARGUMENT", refuses_malformed_requests),
    ("4. The OpenAI-compatible endpoint answers and refuses like OpenAI", openai_endpoint),
    ("5. GenerateStream, where served, streams what Generate answers", streams_what_generate_answers),
]


def check_policy(address: str, openai_url: str = "", timeout_s: float = 60.0) -> list[Result]:
    """Run every clause against the Policy server at ``address`` (and its OpenAI endpoint at
    ``openai_url``, e.g. ``http://127.0.0.1:8000/v1``; "" skips clause 4's checks)."""
    with grpc.insecure_channel(address) as channel:
        return run_clauses(CLAUSES, _Run(policy_pb2_grpc.PolicyStub(channel), openai_url, timeout_s))
