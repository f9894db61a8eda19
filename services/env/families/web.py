"""`web`: MiniWoB++ tasks (real web pages) in a headless Chromium, as text.

The pages, their problem generators and their rewards are MiniWoB++'s own (the ``miniwob``
package; Farama). The family drives them through Selenium in browsers it owns (`web_browser`):
a bounded pool, one browser per open episode, reused across episodes. The agent reads the
instruction and the page's elements with stable refs (`web_page.render_page`) and acts with
``click <ref>`` or ``type <ref> "text"`` (`web_actions`, parsed strictly: anything else is shown
back as invalid and changes nothing). The page decides the reward; only a raw reward of exactly 1
is a win (partial credit is a loss), and the page's wall clock is switched off (`PAGE_CLOCK_MS`),
so the step budget alone ends a slow episode.

Knobs: ``task`` (index into `web_page.TASKS`, easiest first), ``distractors`` (inert buttons,
links, fields or checkboxes of the task's kind added to the same page: a `Knob.same_task` knob)
and ``min_text`` (typing tasks: the problem is redrawn until every text to type has at least this
many characters). A task's seed draws MiniWoB's problem (``Math.seedrandom``); the episode seed
changes nothing (the pages have no other randomness).

With ``proposer: model`` the environment model rewrites instructions (`services.env.web_variants`):
knob ``instruction`` names a written instruction template (0: the page's own instruction), which
the family must hold (`add_written`, or `load_version` from the task version's metadata key
`INSTRUCTION_KEY`); the parametric proposer never moves it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from services.common.errors import InvalidArgumentError
from services.env.families.base import Episode, Knob, StepResult, TaskFamily, TaskSpec, rollout_instance
from services.env.families.web_actions import ActionSyntaxError, parse_action
from services.env.families.web_browser import BrowserPool
from services.env.families.web_page import (DISTRACTOR_WORDS, TASKS, Element, admissible_actions, expert_plan,
                                            flatten_dom, is_success, outcome_text, page_content, quoted, render_page)
from services.env.web_variants import VariantError, fill_template, template_id

__all__ = ["WebFamily", "WebEpisode", "DISTRACTOR_KIND", "DISTRACTOR_TEXT", "INSTRUCTION_KEY"]

INSTRUCTION_KEY = "web_instruction"
"""``TaskVersion.metadata`` key of a written instruction template (`web_variants.instruction_template`)."""

DISTRACTOR_KIND: dict[str, str] = {"click-button": "button", "click-link": "link", "focus-text": "field",
                                   "enter-text": "field", "click-checkboxes": "checkbox", "login-user": "field"}
"""What the ``distractors`` knob adds to each task's page."""
DISTRACTOR_TEXT = "That element does nothing for the task: the episode ends (failure)."
"""What the agent reads when an action on a distractor ends its episode (``distractor_ends_episode``)."""


class WebEpisode(Episode):
    """One MiniWoB++ episode on a pooled browser; the browser goes back to the pool when the page
    ends the episode or the episode is closed, whichever comes first."""

    def __init__(self, pool: BrowserPool, task: str, seed: int, distractors: int, min_text: int,
                 screenshots: bool = False, template: str = "", distractor_ends_episode: bool = False) -> None:
        self.pool = pool
        self.task = task
        self.screenshots = screenshots
        self.distractor_ends_episode = distractor_ends_episode
        """An action on a distractor ends the episode as a failure (else it changes nothing)."""
        self.browser: Any = pool.acquire(task)
        try:
            self.browser.begin(task, seed, min_text, DISTRACTOR_KIND[task], distractors, DISTRACTOR_WORDS)
            self.page_utterance = str(self.browser.snapshot()["utterance"])
            """The page's own instruction (before a written template replaces it)."""
            if template:
                self.browser.set_instruction(fill_template(template, quoted(self.page_utterance)))
            self._read()
        except BaseException:
            self._give_back(broken=True)
            raise
        self.task_text = f"Web task ({task}): {self.utterance}"
        self.won = False
        self.ended = False

    def _read(self) -> dict[str, Any]:
        snap = self.browser.snapshot()
        self.utterance = str(snap["utterance"])
        if snap["dom"] is not None:
            self.elements: list[Element] = flatten_dom(snap["dom"])
            self.observation = render_page(self.utterance, self.elements)
            self.admissible_actions = admissible_actions(self.utterance, self.elements)
        if self.screenshots:
            self.screenshot_png = self.browser.screenshot()
        return snap

    def _give_back(self, broken: bool = False) -> None:
        if self.browser is not None:
            browser, self.browser = self.browser, None
            self.pool.release(browser, broken)

    def step(self, action: str) -> StepResult:
        """Apply one ``click``/``type`` action; an unparsable one or one the page refuses (unknown
        ref, typing into a button) changes nothing and says why in the observation. With
        ``distractor_ends_episode``, an action on a distractor ends the episode as a failure."""
        if self.ended or self.browser is None:
            raise InvalidArgumentError("the web episode has ended")
        try:
            parsed = parse_action(action)
        except ActionSyntaxError as exc:
            return self._unchanged(f"Invalid action: {exc}")
        if self.distractor_ends_episode and any(e.ref == parsed.ref and e.distractor for e in self.elements):
            return self._end(DISTRACTOR_TEXT, won=False)
        try:
            refused = (self.browser.click(parsed.ref) if parsed.kind == "click"
                       else self.browser.type(parsed.ref, parsed.text))
            if refused:
                return self._unchanged(f"Invalid action {action.strip()!r}: {refused}.")
            snap = self._read()
        except Exception:
            self.ended = True
            self._give_back(broken=True)
            raise
        if snap["done"]:
            raw = float(snap["raw"])
            return self._end(outcome_text(raw), won=is_success(raw))
        return StepResult(self.observation, self.admissible_actions, 0.0, False, False, self._plan_length())

    def _end(self, text: str, won: bool) -> StepResult:
        self.ended = True
        self.won = won
        self.observation = f"Instruction: {self.utterance}\n{text}"
        self.admissible_actions = ()
        self._give_back()
        return StepResult(self.observation, (), 1.0 if won else 0.0, True, won, 0 if won else None)

    def _unchanged(self, note: str) -> StepResult:
        observation = f"{note}\n{self.observation}"
        return StepResult(observation, self.admissible_actions, 0.0, False, False, self._plan_length())

    def _plan_length(self) -> int | None:
        plan = self.oracle_plan()
        return None if plan is None else len(plan)

    def oracle_plan(self) -> list[str] | None:
        """The scripted expert's plan from the current page ([] once won, None once lost)."""
        if self.ended:
            return [] if self.won else None
        return expert_plan(self.task, self.utterance, self.elements)

    def close(self) -> None:
        """Give the browser back to the pool (idempotent)."""
        self._give_back()


class WebFamily(TaskFamily):
    """MiniWoB++ tasks in pooled headless Chromium browsers (see the module docstring)."""

    name = "web"
    library = "miniwob"
    knobs = (
        Knob("task", 0, len(TASKS) - 1, 1, description=f"Index into {', '.join(TASKS)} (easiest first)."),
        Knob("distractors", 0, 8, 1, default=0, same_task=True,
             description="Inert elements of the task's kind added to the same page."),
        Knob("min_text", 0, 5, 1, default=0,
             description="Typing tasks: every text to type has at least this many characters (login-user's passwords have 2-5)."),
        Knob("instruction", 0, 2**31 - 1, 1, default=0,
             description="0: the page's own instruction; else the id of a model-written instruction template "
                         "(proposer: model; never moved by the parametric proposer)."),
    )
    max_steps = 8

    def __init__(self, browsers: int = 2, wait_s: float = 120.0, screenshots: bool = False,
                 distractor_ends_episode: bool = False) -> None:
        self.pool = BrowserPool(browsers, wait_s)
        self.screenshots = screenshots
        """Capture the page as PNG bytes after Reset and every Step (`Episode.screenshot_png`)."""
        self.distractor_ends_episode = distractor_ends_episode
        """A click on or typing into a distractor ends the episode as a failure (`WebEpisode`)."""
        self.written: dict[int, str] = {}
        """Written instruction templates by id (the ``instruction`` knob)."""
        self.max_open_episodes = browsers

    def task_of(self, spec: TaskSpec) -> str:
        """The MiniWoB task name of ``spec`` (validated)."""
        self.validate(spec)
        return TASKS[int(spec.knobs["task"])]

    def make_episode(self, spec: TaskSpec, episode_seed: int) -> WebEpisode:
        """An episode of the page drawn from the task's seed (``episode_seed`` changes nothing), with
        the written instruction of knob ``instruction`` in place of the page's own when it is not 0.

        Raises:
            InvalidArgumentError: knobs out of bounds, or a written instruction this process does not hold.
            VariantError: the written template needs more quoted texts than the page's instruction has.
        """
        task = self.task_of(spec)
        return WebEpisode(self.pool, task, int(spec.seed), int(spec.knobs.get("distractors", 0)),
                          int(spec.knobs.get("min_text", 0)), self.screenshots, self.template_of(spec),
                          self.distractor_ends_episode)

    def template_of(self, spec: TaskSpec) -> str:
        """The written instruction template of ``spec`` ("" for the page's own instruction).

        Raises:
            InvalidArgumentError: knob ``instruction`` names a template this process does not hold.
        """
        number = int(spec.knobs.get("instruction", 0))
        if number and number not in self.written:
            raise InvalidArgumentError(f"web: knob instruction={number} names no written instruction held here "
                                       f"(its task version's metadata {INSTRUCTION_KEY!r} loads it)")
        return self.written.get(number, "")

    def add_written(self, template: str) -> int:
        """Hold a written instruction template; returns its id (the ``instruction`` knob's value)."""
        number = template_id(template)
        self.written[number] = template
        return number

    def load_version(self, metadata: Mapping[str, str]) -> None:
        """Hold the written instruction a task version carries in its metadata (`INSTRUCTION_KEY`)."""
        if metadata.get(INSTRUCTION_KEY):
            self.add_written(metadata[INSTRUCTION_KEY])

    def instruction(self, spec: TaskSpec) -> str:
        """The instruction the agent reads on ``spec``'s page (a written one filled in, if any)."""
        episode = self.make_episode(spec, 0)
        try:
            return episode.utterance
        finally:
            episode.close()

    def check_instruction(self, spec: TaskSpec, pages: int = 3) -> int:
        """Validate a written instruction by rollouts: the scripted expert, reading only the written
        instruction, plays ``spec``'s page and ``pages - 1`` other pages of the same knobs (seeds
        derived from ``spec.seed``, the pages a per-rollout task plays) and must win every one.

        Returns:
            The expert's plan length on ``spec``'s own page (the candidate's oracle plan length).

        Raises:
            VariantError: the expert cannot read the instruction or loses a page (the reason names
                the page's seed and instruction).
        """
        first = 0
        for i in range(pages):
            seed = spec.seed if i == 0 else rollout_instance(spec, i).seed
            episode = self.make_episode(TaskSpec(spec.family, dict(spec.knobs), seed), 0)
            try:
                plan = episode.oracle_plan()
                if not plan:
                    raise VariantError(f"the expert cannot read the written instruction on page seed {seed}: "
                                       f"{episode.utterance!r}")
                first = first or len(plan)
                for action in plan:
                    result = episode.step(action)
                    if result.terminated:
                        break
                if not episode.won:
                    raise VariantError(f"the expert lost page seed {seed} following the written instruction "
                                       f"{episode.utterance!r} (the page's own: {episode.page_utterance!r})")
            finally:
                episode.close()
        return first

    def instance_key(self, spec: TaskSpec) -> str:
        """``web:<task>:<hash>`` of the page's content at the start (`web_page.page_content`: the
        instruction and the elements' roles and texts), so two seeds are one instance when they ask
        the same of the same elements, wherever the page puts them (focus-text's pages, whose field
        only moves, are all one instance; `docs/web.md` lists how many contents each task has).

        A written instruction (knob ``instruction``) does not change the key: the page is the same.

        Raises:
            InvalidArgumentError: knobs out of bounds.
        """
        episode = self.make_episode(TaskSpec(spec.family, {**spec.knobs, "instruction": 0.0}, spec.seed), 0)
        try:
            content = page_content(episode.utterance, episode.elements)
        finally:
            episode.close()
        return f"{self.name}:{episode.task}:{hashlib.sha256(content.encode()).hexdigest()[:20]}"

    def knob_preference(self, harder: bool, bad_step_share: float) -> list[str]:
        """Distractors first (the same page, one notch busier), then text length, then the task
        (``instruction`` is the environment model's, never moved)."""
        return ["distractors", "min_text", "task"]

    def start(self) -> None:
        """Start all the pool's browsers before the env serves (`BrowserPool.warm`).

        Raises:
            BrowserMissingError: Chromium or chromedriver is not installed.
        """
        self.pool.warm()

    def close(self) -> None:
        """Quit the family's browsers."""
        self.pool.close()
