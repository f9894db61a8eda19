"""The model proposer's I/O shell: asks an OpenAI-compatible chat-completions server (the policy's
own /v1 endpoint, vLLM, any hosted model) to write a variant of a text task, a rewrite of a coding
problem or of a web task's instruction; the requests and parsing are pure (`services.env.text_variants`,
`services.env.code_variants`, `services.env.web_variants`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import openai

from services.common.config.env import ModelProposerConfig
from services.env.code_variants import code_variant_messages, parse_code_variant
from services.env.families.code_problems import CodeProblem
from services.env.text_variants import TextTask, VariantError, parse_variant, variant_messages
from services.env.web_variants import WebRewrite, parse_web_variant, web_variant_messages

__all__ = ["ModelProposer"]


class ModelProposer:
    """Writes one variant per call with ``cfg.model`` at ``cfg.base_url``."""

    def __init__(self, cfg: ModelProposerConfig) -> None:
        self.cfg = cfg
        self.client = openai.AsyncOpenAI(base_url=cfg.base_url, api_key=os.environ.get(cfg.api_key_env, "EMPTY"),
                                         timeout=cfg.timeout_s, max_retries=1)

    @property
    def name(self) -> str:
        """``model:<name>`` (what the candidate's metadata records as its author)."""
        return f"model:{self.cfg.model or 'default'}"

    async def write(self, parent: TextTask, direction: int, acc: float,
                    failed_answers: Sequence[str] = ()) -> TextTask:
        """The model's variant of ``parent`` (not yet checked: `text_variants.check_variant`).

        Raises:
            VariantError: the server failed or refused, or its answer is no valid variant (the
                message is the reason recorded on ``rla.env.pool``).
        """
        messages = variant_messages(parent, direction, acc, list(failed_answers)[: self.cfg.max_failed_answers])
        return parse_variant(await self._ask(messages))

    async def write_code(self, parent: CodeProblem, direction: int, acc: float,
                         failed_answers: Sequence[str] = ()) -> CodeProblem:
        """The model's rewrite of a coding problem (not yet checked: `code_variants.check_code_variant`).

        Raises:
            VariantError: the server failed or refused, or its answer is no valid problem.
        """
        messages = code_variant_messages(parent, direction, acc, list(failed_answers)[: self.cfg.max_failed_answers])
        return parse_code_variant(await self._ask(messages))

    async def write_instruction(self, instruction: str, task: str, direction: int, acc: float,
                                failed_actions: Sequence[str] = ()) -> WebRewrite:
        """The model's rewrite of a web task's instruction (not yet checked: `web_variants.instruction_template`,
        then `WebFamily.check_instruction`).

        Raises:
            VariantError: the server failed or refused, or its answer is no valid rewrite.
        """
        messages = web_variant_messages(instruction, task, direction, acc,
                                        list(failed_actions)[: self.cfg.max_failed_answers])
        return parse_web_variant(await self._ask(messages))

    async def _ask(self, messages: list[dict[str, str]]) -> str:
        """The model's answer text to ``messages``. Raises VariantError when the server fails."""
        try:
            response = await self.client.chat.completions.create(
                model=self.cfg.model, messages=messages,  # type: ignore[arg-type]  # plain role/content dicts
                temperature=self.cfg.temperature, max_tokens=self.cfg.max_tokens)
        except openai.OpenAIError as exc:
            raise VariantError(f"the model at {self.cfg.base_url} failed: {type(exc).__name__}: {exc}") from None
        if not response.choices:
            raise VariantError(f"the model at {self.cfg.base_url} returned no choice")
        return response.choices[0].message.content or ""
