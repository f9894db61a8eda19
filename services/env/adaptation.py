"""Loop 3 shell: act on the critic's task reports — request, propose, validate, accept or reject.

What a report does is decided by `services.env.decisions.decide` (pure, table-tested); this shell
reads the slot and the facts the decision needs, and applies the `Decision` (pool writes, proposals,
events).

Text families with ``proposer: model`` (family ``live``, once a task is admitted to ``train``; families
``code`` and ``web``) get their variants from a `ModelProposer` instead of a knob move: the model's JSON
must parse, build and pass the family's verifier (code: the rewritten problem's reference passes its own
tests in the sandbox; web: the scripted expert wins the task's pages reading the rewritten instruction)
before the candidate is pending; the acceptance rule then decides as for any candidate.

Every decision is published on `rla.env.pool` as a `TaskPoolEvent` with its reason and counted
in Prometheus. Handlers are idempotent: a redelivered report finds its effect already in the
pool (the pending candidate records the job that asked for it) and publishes the same event ids.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from prometheus_client import Counter
from rlanything.v1.env_pb2 import TaskSlot, TaskVersion
from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER, DIRECTION_UNSPECIFIED, TaskPoolEvent, TaskReport

from services.common.bus import Delivery, EventBus
from services.common.config import AdaptationConfig
from services.common.errors import InvalidArgumentError
from services.common.rounds import pool_event_id
from services.common.streams import Subjects
from services.env.acceptance import VariantGate
from services.env.decisions import (LIVE, RETRY_KEY, Action, Decision, Facts, check_report, decide, needs_clash,
                                    plan_moves, retry_report, undeployable_reason)
from services.env.code_variants import check_code_variant, solved_heldout
from services.env.families.code_problems import CodeProblem, written_key
from services.env.disjoint import eval_clash
from services.env.pool import TaskPool, spec_of
from services.env.proposer import Proposer
from services.env.slots import ref_of
from services.env.text_variants import TextTask, VariantError, check_variant
from services.env.families.web import INSTRUCTION_KEY
from services.env.web_variants import instruction_template

__all__ = ["Adaptation", "POOL_DECISIONS", "RETRY_KEY", "decide", "WEB"]

WEB = "web"
"""The family whose written variants are instructions (`_write_instruction`)."""
INSTRUCTION_PAGES = 3
"""Pages the scripted expert must win with a written instruction of a per-rollout web task."""

if TYPE_CHECKING:
    from services.env.code_tasks import CodeTasks
    from services.env.live_tasks import LiveTasks
    from services.env.model_proposer import ModelProposer

log = logging.getLogger("rlanything.env.adaptation")
HELDOUT_REFUSED = Counter("rla_env_heldout_refused_total", "Model-written problems refused for being a held-out or "
                          "OOD instance, by family and check (key: the same content key; behaviour: its reference "
                          "solves a held-out problem).", ["family", "check"])
POOL_DECISIONS = Counter("rla_env_pool_decisions_total", "Task-pool decisions by kind and direction.",
                         ["kind", "direction"])
_KIND = TaskPoolEvent.Kind


class Adaptation:
    """Handles `TaskReport` events for the env service."""

    def __init__(self, pool: TaskPool, bus: EventBus, proposer: Proposer, cfg: AdaptationConfig,
                 live: "LiveTasks | None" = None, writer: "ModelProposer | None" = None,
                 per_rollout: frozenset[str] = frozenset(), model_families: frozenset[str] = frozenset(),
                 code_tasks: "CodeTasks | None" = None) -> None:
        self.pool = pool
        self.code_tasks = code_tasks
        """Where written coding problems are stored (the KV bucket and the code family's mirror)."""
        self.model_families = model_families
        """Families other than live whose variants the model writes (``proposer: model``: family code)."""
        self.per_rollout = per_rollout
        """Families whose train tasks stand for their knobs (each rollout its own instance): a
        candidate's difficulty moves with its knobs, and one instance's oracle plan is not asked to."""
        self.live = live
        self.writer = writer
        """The model proposer of the live family (``proposer: model``; None: it has none)."""
        self.bus = bus
        self.proposer = proposer
        self.cfg = cfg
        self.gate = VariantGate(cfg.band_low, cfg.band_high)

    async def on_report(self, report: TaskReport, delivery: Delivery) -> None:
        """Consumer handler for `rla.critic.task`: `decide`, then apply the decision."""
        check_report(report)
        slot = await self.pool.slot(report.task.slot_id)
        decision = decide(report, slot, self.cfg, await self._facts(report, slot))
        action = decision.action
        if action is Action.IGNORE:
            return
        if action in (Action.ACCEPT, Action.REJECT):
            await self._resolve(report, slot, decision)
        elif action is Action.ADMIT:
            await self._admit(report, slot, decision)
        else:  # RECORD, PROPOSE, WRITE: the active version's own rollouts
            await self.pool.record_acc(slot.slot_id, report.acc, report.round)
            if action is Action.PROPOSE:
                await self._variant(report, slot, decision.direction)
            elif action is Action.WRITE:
                await self._write_variant(report, slot, decision.direction)

    async def _facts(self, report: TaskReport, slot: TaskSlot) -> Facts:
        """What `decide` reads beyond the report, the slot and the config."""
        clash = None
        if needs_clash(report, slot):
            clash = await asyncio.to_thread(eval_clash, self.pool.family(slot.family),
                                            spec_of(slot.family, slot.pending), slot.family in self.per_rollout,
                                            await self.pool.held_out_keys())
        live = self.live if slot.family == LIVE else None
        return Facts(clash=clash, heldout=live.heldout(slot) if live else False,
                     has_hint=live.has_hint(slot) if live else False, writer=self.writer is not None)

    async def _admit(self, report: TaskReport, slot: TaskSlot, decision: Decision) -> None:
        """A live task's admission verdict: its new split and hint, then the event."""
        verdict = decision.live
        assert verdict is not None
        new_slot = await self.pool.apply_live(slot.slot_id, verdict.split, verdict.hint)
        if verdict.accepted:
            await self.pool.record_acc(slot.slot_id, report.acc, report.round)
            kind = _KIND.KIND_ACCEPTED
        else:
            kind = _KIND.KIND_PROPOSED if verdict.hint is not None else _KIND.KIND_REJECTED
        await self._publish(report, kind, DIRECTION_EASIER if verdict.hint is not None else DIRECTION_UNSPECIFIED,
                            new_slot, new_slot.active if verdict.hint is not None else None, verdict.reason,
                            acc_new=report.acc)

    async def _write_variant(self, report: TaskReport, slot, direction: int) -> None:
        """Ask the model for a variant of a live task; refuse it (with the reason) unless it parses,
        builds and passes the family's verifier; else make it the slot's pending candidate."""
        assert self.writer is not None and self.live is not None
        await self._publish(report, _KIND.KIND_REQUESTED, direction, slot, None,
                            f"acc={report.acc:.3f} over {report.rollouts} rollouts", acc_prev=report.acc)
        parent = self.live.content(slot)
        if parent is None:
            await self._publish(report, _KIND.KIND_REJECTED_UNDEPLOYABLE, direction, slot, None,
                                "model proposer: the parent task's content is not loaded here", acc_prev=report.acc)
            return
        failed = [a for b in report.bad_steps for a in b.actions]
        text = TextTask(parent.prompt, parent.reference, parent.hint)
        try:
            variant = await self.writer.write(text, direction, report.acc, failed)
            check_variant(text, variant)
            seed, digest = await self.live.add_variant(parent, variant.prompt, variant.reference, variant.hint)
            knobs = {"hint": 0.0}
            plan = await asyncio.to_thread(self.pool.check_candidate, spec_of(slot.family, TaskVersion(
                knobs=knobs, seed=seed)))
        except (VariantError, InvalidArgumentError) as exc:
            await self._publish(report, _KIND.KIND_REJECTED_UNDEPLOYABLE, direction, slot, None,
                                f"model proposer ({self.writer.name}): {exc}", acc_prev=report.acc)
            return
        if plan is None:
            await self._publish(report, _KIND.KIND_REJECTED_UNDEPLOYABLE, direction, slot, None,
                                f"model proposer ({self.writer.name}): the variant has no winning answer",
                                acc_prev=report.acc)
            return
        metadata = {**slot.active.metadata, "candidate_id": digest, "written_by": self.writer.name}
        candidate = TaskVersion(knobs=knobs, seed=seed, oracle_plan_length=plan, parent_version=slot.active.version,
                                created_round=report.round, parent_acc=report.acc, direction=direction,  # type: ignore[arg-type]  # protobuf enum fields take their int values
                                created_from_job=report.job_id, metadata=metadata)
        new_slot = await self.pool.add_candidate(slot.slot_id, candidate)
        side = "harder" if direction == DIRECTION_HARDER else "easier"
        await self._publish(report, _KIND.KIND_PROPOSED, direction, new_slot, new_slot.pending,
                            f"model proposer ({self.writer.name}): {side} variant {digest[:12]}: "
                            f"{variant.prompt[:80]!r} -> {variant.reference!r}", acc_prev=report.acc)

    async def _variant(self, report: TaskReport, slot: TaskSlot, direction: int, retry: int = 0) -> None:
        """A variant of ``slot``'s active task: written by the model for its families (``code``), else a
        knob move (`_propose`)."""
        if slot.family in self.model_families and self.writer is not None:
            if slot.family == WEB:
                await self._write_instruction(report, slot, direction, retry)
            else:
                await self._write_problem(report, slot, direction, retry)
        else:
            await self._propose(report, slot, direction, retry)

    async def _write_problem(self, report: TaskReport, slot, direction: int, retry: int = 0) -> None:
        """Ask the model to rewrite a coding problem; refuse it (with the reason) unless it parses and its
        reference passes every one of its own tests in the family's sandbox; else make it the slot's
        pending candidate (its own rollouts then decide, as for any candidate)."""
        assert self.writer is not None
        await self._publish(report, _KIND.KIND_REQUESTED, direction, slot, None,
                            f"acc={report.acc:.3f} over {report.rollouts} rollouts", acc_prev=report.acc)
        family = self.pool.family(slot.family)
        failed = [a for b in report.bad_steps for a in b.actions]
        try:
            parent = await asyncio.to_thread(family.problem, spec_of(slot.family, slot.active))  # type: ignore[attr-defined]  # the code family
            variant = await self.writer.write_code(parent, direction, report.acc, failed)
            await asyncio.to_thread(check_code_variant, parent, variant, family.run_tests)  # type: ignore[attr-defined]  # runs in the sandbox
            await self._not_held_out(family, variant)
        except (VariantError, InvalidArgumentError) as exc:
            await self._publish(report, _KIND.KIND_REJECTED_UNDEPLOYABLE, direction, slot, None,
                                f"model proposer ({self.writer.name}): {exc}", acc_prev=report.acc)
            return
        seed = (await self.code_tasks.store(variant) if self.code_tasks is not None
                else family.add_written(variant))  # type: ignore[attr-defined]  # the code family
        candidate = TaskVersion(knobs=dict(slot.active.knobs), seed=seed, oracle_plan_length=slot.active.oracle_plan_length,
                                parent_version=slot.active.version, created_round=report.round,
                                parent_acc=report.acc, direction=direction, created_from_job=report.job_id,  # type: ignore[arg-type]  # protobuf enum fields take their int values
                                metadata={"written_by": self.writer.name, **({RETRY_KEY: str(retry)} if retry else {})})
        new_slot = await self.pool.add_candidate(slot.slot_id, candidate)
        side = "harder" if direction == DIRECTION_HARDER else "easier"
        await self._publish(report, _KIND.KIND_PROPOSED, direction, new_slot, new_slot.pending,
                            f"model proposer ({self.writer.name}): {side} problem, its reference passed its "
                            f"{len(variant.tests)} tests in the sandbox: {variant.statement[:80]!r}",
                            acc_prev=report.acc)

    async def _not_held_out(self, family, variant: CodeProblem) -> None:
        """Refuse a written problem that is a held-out or OOD instance: by its key (`written_key`: the
        same function, or the same statement up to case and spacing), then by behaviour (its
        reference passes every test of a held-out problem: `solved_heldout`); each refusal counted in
        ``rla_env_heldout_refused_total``.

        Raises:
            VariantError: it is one (the reason names the held-out instance).
        """
        key = f"{family.name}:{written_key(variant)}"
        if key in await self.pool.held_out_keys():
            HELDOUT_REFUSED.labels(family.name, "key").inc()
            raise VariantError(f"rejected: it is a held-out or OOD instance ({key})")
        specs = await self.pool.held_out_of(family.name)
        heldout = await asyncio.to_thread(lambda: [(family.instance_key(s), family.problem(s)) for s in specs])
        solved = await asyncio.to_thread(solved_heldout, variant, heldout, family.run_tests)
        if solved is not None:
            HELDOUT_REFUSED.labels(family.name, "behaviour").inc()
            raise VariantError(f"rejected: its reference passes every test of the held-out or OOD problem {solved}: "
                               "the same problem in other words")

    async def _write_instruction(self, report: TaskReport, slot, direction: int, retry: int = 0) -> None:
        """Ask the model to rewrite a web task's instruction; refuse it (with the reason) unless it keeps
        the instruction's quoted texts and the scripted expert, reading it, wins the task's pages
        (`WebFamily.check_instruction`); else make it the slot's pending candidate, the template in its
        metadata (its own rollouts then decide, as for any candidate)."""
        assert self.writer is not None
        await self._publish(report, _KIND.KIND_REQUESTED, direction, slot, None,
                            f"acc={report.acc:.3f} over {report.rollouts} rollouts", acc_prev=report.acc)
        family = self.pool.family(slot.family)
        failed = [a for b in report.bad_steps for a in b.actions]
        parent = spec_of(slot.family, slot.active)
        try:
            family.load_version(slot.active.metadata)
            instruction = await asyncio.to_thread(family.instruction, parent)  # type: ignore[attr-defined]  # the web family
            rewrite = await self.writer.write_instruction(instruction, family.task_of(parent),  # type: ignore[attr-defined]  # the web family
                                                          direction, report.acc, failed)
            template = instruction_template(instruction, rewrite.instruction)
            knobs = {**parent.knobs, "instruction": float(family.add_written(template))}  # type: ignore[attr-defined]  # the web family
            if rewrite.distractors is not None:
                knobs["distractors"] = float(rewrite.distractors)
            pages = INSTRUCTION_PAGES if slot.family in self.per_rollout else 1  # per-rollout: the template meets many pages
            plan = await asyncio.to_thread(family.check_instruction, spec_of(slot.family, TaskVersion(  # type: ignore[attr-defined]  # the web family
                knobs=knobs, seed=parent.seed)), pages)
        except (VariantError, InvalidArgumentError) as exc:
            await self._publish(report, _KIND.KIND_REJECTED_UNDEPLOYABLE, direction, slot, None,
                                f"model proposer ({self.writer.name}): {exc}", acc_prev=report.acc)
            return
        candidate = TaskVersion(knobs=knobs, seed=parent.seed, oracle_plan_length=plan,
                                parent_version=slot.active.version, created_round=report.round,
                                parent_acc=report.acc, direction=direction, created_from_job=report.job_id,  # type: ignore[arg-type]  # protobuf enum fields take their int values
                                metadata={**slot.active.metadata, INSTRUCTION_KEY: template, "written_by": self.writer.name,
                                          **({RETRY_KEY: str(retry)} if retry else {})})
        new_slot = await self.pool.add_candidate(slot.slot_id, candidate)
        side = "harder" if direction == DIRECTION_HARDER else "easier"
        await self._publish(report, _KIND.KIND_PROPOSED, direction, new_slot, new_slot.pending,
                            f"model proposer ({self.writer.name}): {side} instruction, the expert won its pages with "
                            f"it: {rewrite.instruction[:80]!r}" + ("" if rewrite.distractors is None else
                                                                  f", distractors {rewrite.distractors}"),
                            acc_prev=report.acc)

    async def _resolve(self, report: TaskReport, slot: TaskSlot, decision: Decision) -> None:
        """Accept or reject the slot's pending candidate; a rejected one may be retried at once."""
        pending = slot.pending
        accepted = decision.action is Action.ACCEPT
        self.gate.count(pending.direction, accepted)
        await self.pool.resolve(slot.slot_id, pending.version, accepted)
        if decision.record_acc:  # the new active version's acc is its own candidate rollouts' acc
            await self.pool.record_acc(slot.slot_id, report.acc, report.round)
        kind = _KIND.KIND_ACCEPTED if accepted else _KIND.KIND_REJECTED
        await self._publish(report, kind, pending.direction, slot, pending, decision.reason,
                            acc_prev=pending.parent_acc, acc_new=report.acc)
        if not decision.retry:
            return
        parent = await self.pool.slot(slot.slot_id)
        again = retry_report(report, pending, parent)
        if again is not None:
            await self._variant(again, parent, pending.direction, retry=decision.retry)

    async def _propose(self, report: TaskReport, slot, direction: int, retry: int = 0) -> None:
        """Request and propose a variant of ``slot``'s active task; ``retry`` counts the proposals
        made in a row after rejections (`AdaptationConfig.retry_rejected`), kept in its metadata."""
        await self._publish(report, _KIND.KIND_REQUESTED, direction, slot, None,
                            f"acc={report.acc:.3f} over {report.rollouts} rollouts", acc_prev=report.acc)
        family = self.pool.family(slot.family)
        parent = spec_of(slot.family, slot.active)
        parent_plan = slot.active.oracle_plan_length
        tries = max(1, self.cfg.variant_tries)
        plan, proposal, why = None, None, ""
        for attempt in range(tries):  # new seeds until the plan moves the asked way (difficulty really moves)
            proposal = self.proposer.propose(family, parent, direction, report, parent_plan,
                                             attempt=slot.next_version * tries + attempt, try_index=attempt,
                                             rejected=slot.rejected)
            if proposal is None:
                break
            try:
                plan = await asyncio.to_thread(self.pool.check_candidate, proposal.spec)
            except Exception as exc:  # noqa: BLE001 - an undeployable candidate is a recorded decision
                plan, why = None, f"does not load: {type(exc).__name__}: {exc}"
                continue
            if plan is None:
                why = "no winning plan (the oracle cannot solve it)"
                continue
            clash = await asyncio.to_thread(eval_clash, family, proposal.spec, slot.family in self.per_rollout,
                                            await self.pool.held_out_keys())
            if clash is not None:  # held out by construction: never trained on
                plan, why = None, clash
                continue
            if plan_moves(proposal, direction, parent_plan, plan, slot.family in self.per_rollout):
                break
            why = f"oracle plan {plan} steps does not move from the parent's {parent_plan} in {tries} tries"
            plan = None
        undeployable = undeployable_reason(proposal, plan, why, not family.knobs)
        if undeployable is not None or proposal is None or plan is None:
            await self._publish(report, _KIND.KIND_REJECTED_UNDEPLOYABLE, direction, slot, None,
                                str(undeployable), acc_prev=report.acc)
            return
        candidate = TaskVersion(knobs=proposal.spec.knobs, seed=proposal.spec.seed, oracle_plan_length=plan,
                                parent_version=slot.active.version, created_round=report.round,
                                parent_acc=report.acc, direction=direction, created_from_job=report.job_id,  # type: ignore[arg-type]  # protobuf enum fields take their int values
                                metadata={**family.metadata(), **({RETRY_KEY: str(retry)} if retry else {})})
        new_slot = await self.pool.add_candidate(slot.slot_id, candidate)
        await self._publish(report, _KIND.KIND_PROPOSED, direction, new_slot, new_slot.pending,
                            f"{proposal.note}; oracle plan {plan} steps (parent {slot.active.oracle_plan_length})",
                            acc_prev=report.acc)

    async def _publish(self, report: TaskReport, kind: int, direction: int, slot, candidate,
                       reason: str, acc_prev: float = 0.0, acc_new: float = 0.0) -> None:
        kind_name = _KIND.Name(kind).removeprefix("KIND_").lower()
        event = TaskPoolEvent(event_id=pool_event_id(report.job_id, kind_name), round=report.round, kind=kind,  # type: ignore[arg-type]  # protobuf enum fields take their int values
                              direction=direction, parent=ref_of(slot, slot.active), acc_prev=acc_prev,  # type: ignore[arg-type]  # protobuf enum fields take their int values
                              acc_new=acc_new, reason=reason)
        if candidate is not None:
            event.candidate.CopyFrom(ref_of(slot, candidate))
        await self.bus.publish(Subjects.ENV_POOL, event, msg_id=event.event_id)
        sides: dict[int, str] = {DIRECTION_HARDER: "harder", DIRECTION_EASIER: "easier"}
        side = sides.get(direction, "none")
        POOL_DECISIONS.labels(kind_name, side).inc()
        log.info("pool decision", extra={"kind": kind_name, "direction": side, "slot": slot.slot_id,
                                         "reason": reason})
