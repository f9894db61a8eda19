"""gRPC `Policy.Generate` over the served generation backend, and `Policy.GenerateStream`: one
chat's tokens as they are generated (`TokenPump`), text released as the OpenAI endpoint releases
it (`content_builder`), the generation cancelled when the call is."""

from __future__ import annotations

import grpc
from rlanything.v1 import policy_pb2, policy_pb2_grpc
from rlanything.v1.events_pb2 import SamplingParams

from services.common.request_limit import RequestLimit
from services.common.errors import InvalidArgumentError
from services.common.grpc_runtime import map_errors
from services.common.models.generation import Completion, Generator, Sampling, generate_async
from services.policy.content import content_builder
from services.policy.token_pump import TokenPump

__all__ = ["PolicyServicer", "SERVICE_NAME", "sampling_from_proto"]

SERVICE_NAME = policy_pb2.DESCRIPTOR.services_by_name["Policy"].full_name
ROLES = {"system", "user", "assistant"}
MAX_NEW_TOKENS = 4096


def sampling_from_proto(p: SamplingParams, default_max_new_tokens: int = 64) -> Sampling:
    """Validated `Sampling` from the wire message (0 means "default" for top_p and max_new_tokens).

    Raises:
        InvalidArgumentError: a value is out of range (the message names the field and value).
    """
    if p.temperature < 0:
        raise InvalidArgumentError(f"sampling.temperature must be >= 0, got {p.temperature}")
    if not 0 <= p.top_p <= 1:
        raise InvalidArgumentError(f"sampling.top_p must be in (0, 1], got {p.top_p}")
    if not 0 <= p.max_new_tokens <= MAX_NEW_TOKENS:
        raise InvalidArgumentError(f"sampling.max_new_tokens must be in 1..{MAX_NEW_TOKENS}, got {p.max_new_tokens}")
    return Sampling(temperature=p.temperature, top_p=p.top_p or 1.0,
                    max_new_tokens=p.max_new_tokens or default_max_new_tokens, stop=tuple(p.stop),
                    seed=p.seed or None)


def chats_from_proto(prompts: list[policy_pb2.Conversation]) -> list[list[dict[str, str]]]:
    """Validated chats from the wire message.

    Raises:
        InvalidArgumentError: no prompts, an empty conversation, or an unknown role.
    """
    if not prompts:
        raise InvalidArgumentError("prompts must hold at least one conversation")
    chats = []
    for i, conv in enumerate(prompts):
        if not conv.messages:
            raise InvalidArgumentError(f"prompts[{i}] has no messages")
        for j, m in enumerate(conv.messages):
            if m.role not in ROLES:
                raise InvalidArgumentError(f"prompts[{i}].messages[{j}].role must be one of {sorted(ROLES)}, "
                                           f"got {m.role!r}")
        chats.append([{"role": m.role, "content": m.content} for m in conv.messages])
    return chats


class PolicyServicer(policy_pb2_grpc.PolicyServicer):
    """Generate: token ids, behaviour log-probs and the model version of every completion."""

    def __init__(self, generator: Generator, max_batch: int = 64, admission: RequestLimit | None = None) -> None:
        self.generator = generator
        self.max_batch = max_batch
        self.admission = admission or RequestLimit(64, "policy.max_pending_requests")
        """Bound on generations in progress (shared with the HTTP endpoint): RESOURCE_EXHAUSTED over it."""

    @map_errors
    async def Generate(self, request: policy_pb2.GenerateRequest, context: grpc.aio.ServicerContext
                       ) -> policy_pb2.GenerateResponse:
        chats = chats_from_proto(list(request.prompts))
        sampling = sampling_from_proto(request.sampling)
        if len(chats) > self.max_batch:
            raise InvalidArgumentError(f"at most {self.max_batch} prompts per request, got {len(chats)}")
        version = self.generator.model_version
        with self.admission.slot():
            completions = await generate_async(self.generator, chats, sampling)
        return policy_pb2.GenerateResponse(model_version=version, completions=[_to_proto(c) for c in completions])

    @map_errors
    async def GenerateStream(self, request: policy_pb2.GenerateRequest, context: grpc.aio.ServicerContext) -> None:
        """One chat's completion as chunks (proto ``GenerateChunk``): the tokens that arrived since
        the previous chunk with the text they complete, then a last chunk with the whole completion
        (its text the concatenated chunk texts). The call's cancellation (the client's, a deadline)
        stops the generation at its next token (`hf`) or step (`vllm`).

        Raises:
            InvalidArgumentError: a malformed request (as `Generate`), or not exactly one prompt.
        """
        chats = chats_from_proto(list(request.prompts))
        sampling = sampling_from_proto(request.sampling)
        if len(chats) != 1:
            raise InvalidArgumentError(f"GenerateStream takes exactly one prompt, got {len(chats)}; "
                                       "call Generate for a batch")
        builder = content_builder(self.generator, sampling)
        with self.admission.slot():
            pump = TokenPump(self.generator, chats[0], sampling, None)  # sampling.seed seeds it as in Generate
            pump.start()
            try:
                while True:
                    chunk = policy_pb2.GenerateChunk(model_version=self.generator.model_version)
                    for item in await pump.get():
                        if item[0] == "token":
                            chunk.token_ids.append(item[1])
                            chunk.logprobs.append(item[2])
                            if builder is not None:
                                chunk.text += builder.push(item[1], item[2]).text
                        elif item[0] == "done":
                            c: Completion = item[1]
                            if builder is not None:
                                chunk.text += builder.finish().text
                            chunk.model_version = c.model_version if c.model_version is not None else \
                                chunk.model_version
                            chunk.completion.CopyFrom(_to_proto(c, None if builder is None else builder.text))
                            await context.write(chunk)
                            return
                        else:
                            raise item[1]
                    await context.write(chunk)
            finally:
                if not pump.finished:
                    pump.stop()


def _to_proto(c: Completion, text: str | None = None) -> policy_pb2.Completion:
    """The wire completion of ``c`` (``text``: the content delivered, when it is not ``c.text``)."""
    return policy_pb2.Completion(text=c.text if text is None else text, prompt_token_ids=c.prompt_token_ids,
                                 token_ids=c.token_ids, logprobs=c.logprobs, finish_reason=c.finish_reason)
