"""The `web` family's page logic (pure): MiniWoB++'s DOM as text, the admissible actions, the
scripted experts, and what counts as a win.

The DOM comes from MiniWoB++'s own ``core.getDOMInfo()`` (a tree of dicts: ``tag``, ``ref``,
``text``, ``id``, ``classes``, ``value``, ``focused``, ``children``). A ref is stable for the whole
episode (MiniWoB keeps it on the element as ``data-wob_ref``), so ``click 7`` means the same element
at every step. Text nodes beside elements get negative refs and cannot be clicked; they are shown
as plain text.

Success is the page's own verdict: the episode is won only when the page's raw reward (without
MiniWoB's time scaling) is exactly 1. Partial credit (click-checkboxes gives the share of boxes
set right, e.g. 0.33) is a loss.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.env.families.web_actions import WebAction, format_action

__all__ = ["TASKS", "TYPING_TASKS", "DISTRACTOR_WORDS", "DISTRACTOR_CLASS", "Element", "flatten_dom", "render_page",
           "admissible_actions", "page_content", "quoted", "expert_plan", "is_success", "outcome_text"]

TASKS: tuple[str, ...] = ("click-button", "click-link", "focus-text", "enter-text", "click-checkboxes", "login-user")
"""The MiniWoB++ tasks of the family, easiest first (the ``task`` knob indexes this tuple)."""
TYPING_TASKS = frozenset({"enter-text", "login-user"})
"""Tasks whose instruction holds text to type (the ``min_text`` knob applies to them)."""
DISTRACTOR_WORDS: tuple[str, ...] = (
    "apply", "save", "close", "back", "help", "send", "done", "edit", "open", "share", "print", "reset",
    "search", "more", "undo", "redo", "copy", "paste", "stop", "menu")
"""Texts of the inert elements the ``distractors`` knob adds (none is a word MiniWoB's tasks ask for)."""

_INTERACTIVE_TAGS = frozenset({"BUTTON", "A", "TEXTAREA", "SELECT", "LABEL"})
_TYPABLE = frozenset({"INPUT_text", "INPUT_password", "INPUT_email", "INPUT_search", "INPUT_tel", "INPUT_url",
                      "INPUT_number", "TEXTAREA"})


DISTRACTOR_CLASS = "rla-distractor"
"""CSS class of every element the ``distractors`` knob adds (set by `web_browser`'s page set-up)."""


@dataclass(frozen=True)
class Element:
    """One element (or text run, ``tag == "t"``, negative ``ref``) of the page, in document order."""

    ref: int
    tag: str
    text: str
    id: str = ""
    classes: str = ""
    value: str | bool | None = None
    focused: bool = False
    label: str = ""
    """For an input inside a ``<label>``: the label's text (a checkbox's name)."""
    distractor: bool = False
    """Added by the ``distractors`` knob (class `DISTRACTOR_CLASS` on it or on an element around it)."""

    @property
    def interactive(self) -> bool:
        """Clickable in a meaningful way: buttons, links, inputs, labels."""
        return self.ref > 0 and (self.tag in _INTERACTIVE_TAGS or self.tag.startswith("INPUT_")
                                 or "alink" in self.classes.split())

    @property
    def typable(self) -> bool:
        """A text field (``type`` replaces its text)."""
        return self.ref > 0 and self.tag in _TYPABLE


def flatten_dom(node: Mapping[str, Any], parent_label: str = "", in_distractor: bool = False) -> list[Element]:
    """The elements of a ``core.getDOMInfo()`` tree in document order (depth first)."""
    tag = str(node.get("tag", ""))
    children = node.get("children") or []
    classes = str(node.get("classes") or "")
    distractor = in_distractor or DISTRACTOR_CLASS in classes.split()
    own_label = ""
    if tag == "LABEL":
        own_label = " ".join(str(c.get("text", "")) for c in children if c.get("tag") == "t").strip() or \
            str(node.get("text") or "").strip()
    out = [Element(ref=int(node.get("ref", 0)), tag=tag, text=str(node.get("text") or "").strip(),
                   id=str(node.get("id") or ""), classes=classes,
                   value=node.get("value"), focused=bool(node.get("focused", False)), label=parent_label,
                   distractor=distractor)]
    for child in children:
        out += flatten_dom(child, own_label, distractor)
    return out


def _describe(e: Element) -> str:
    if e.tag == "t":
        return f'text "{e.text}"'
    line = f"[{e.ref}] {e.tag.lower()}"
    if e.tag == "INPUT_checkbox" or e.tag == "INPUT_radio":
        line += (f' "{e.label}"' if e.label else "") + (" checked" if e.value is True else " unchecked")
    elif e.typable:
        line += f' value="{e.value or ""}"'
    elif "alink" in e.classes.split():
        line = f'[{e.ref}] link "{e.text}"'
    elif e.text:
        line += f' "{e.text}"'
    return line + (" (focused)" if e.focused else "")


def page_content(utterance: str, elements: Sequence[Element]) -> str:
    """What a page asks and holds, as text (pure): the instruction, then each element's role (tag),
    text and label in document order, and whether the ``distractors`` knob added it. Not its
    geometry, refs, ids, field values or focus: two seeds are one instance when they ask the same
    thing of the same elements, wherever the page lays them out and whatever an earlier episode left."""
    return "\n".join([utterance] + [f"{e.tag}|{e.text}|{e.label}|{int(e.distractor)}" for e in elements])


def render_page(utterance: str, elements: Sequence[Element]) -> str:
    """The observation: the instruction, then one line per element that has text or can be used
    (``[ref] tag "text"``; fields show ``value="..."``, checkboxes ``checked``/``unchecked``)."""
    lines = [f"Instruction: {utterance}", "Page:"]
    for e in elements:
        if (e.tag == "LABEL" and not e.text) or (e.tag == "t" and e.label):
            continue  # the checkbox line inside the label carries its text
        if e.tag == "t" or e.interactive or e.text:
            lines.append(_describe(e))
    return "\n".join(lines)


def quoted(utterance: str) -> list[str]:
    """The double-quoted strings of an instruction, in order."""
    return re.findall(r'"([^"]*)"', utterance)


def admissible_actions(utterance: str, elements: Sequence[Element], max_actions: int = 64) -> tuple[str, ...]:
    """``click`` on every interactive element, then ``type`` of every quoted string of the
    instruction into every text field (at most ``max_actions``, in that order)."""
    actions = [format_action(WebAction("click", e.ref)) for e in elements if e.interactive and e.tag != "LABEL"]
    for e in elements:
        if e.typable:
            actions += [format_action(WebAction("type", e.ref, q)) for q in quoted(utterance)]
    return tuple(dict.fromkeys(actions))[:max_actions]


def _by_id(elements: Sequence[Element], id_: str) -> Element | None:
    return next((e for e in elements if e.id == id_ and e.ref > 0), None)


def _type_then(field: Element | None, text: str) -> list[str] | None:
    if field is None:
        return None
    return [] if field.value == text else [format_action(WebAction("type", field.ref, text))]


def expert_plan(task: str, utterance: str, elements: Sequence[Element]) -> list[str] | None:
    """The scripted expert's actions from the current page to a win (None: it cannot tell).

    click-button / click-link: click the button / link whose text the instruction quotes;
    focus-text: click the field ``#tt``; enter-text: type the quoted text into ``#tt`` (unless it
    is there) and click Submit; click-checkboxes: toggle each box ``#ch<i>`` whose state differs from
    the instruction's list, then click Submit; login-user: type the quoted user name and password
    into ``#username`` and ``#password`` (where they differ) and click ``#subbtn``. Distractors have
    no id and texts no instruction quotes, so the expert never uses them.

    Raises:
        ValueError: a task outside `TASKS`.
    """
    words = quoted(utterance)
    submit = _by_id(elements, "subbtn")
    if task == "click-button":
        hit = next((e for e in elements if e.tag == "BUTTON" and words and e.text == words[0]), None)
        return None if hit is None else [f"click {hit.ref}"]
    if task == "click-link":
        hit = next((e for e in elements if "alink" in e.classes.split() and words and e.text == words[0]), None)
        return None if hit is None else [f"click {hit.ref}"]
    if task == "focus-text":
        field = _by_id(elements, "tt")
        return None if field is None else [f"click {field.ref}"]
    if task == "enter-text":
        typed = _type_then(_by_id(elements, "tt"), words[0]) if words else None
        return None if typed is None or submit is None else typed + [f"click {submit.ref}"]
    if task == "login-user":
        if len(words) < 2 or submit is None:
            return None
        user, password = _type_then(_by_id(elements, "username"), words[0]), _type_then(_by_id(elements, "password"),
                                                                                         words[1])
        return None if user is None or password is None else user + password + [f"click {submit.ref}"]
    if task == "click-checkboxes":
        m = re.fullmatch(r"Select (.*) and click Submit\.", utterance)
        if m is None or submit is None:
            return None
        targets = set() if m.group(1) == "nothing" else set(m.group(1).split(", "))
        boxes = [e for e in elements if e.tag == "INPUT_checkbox" and e.id.startswith("ch")]
        return [f"click {b.ref}" for b in boxes if (b.value is True) != (b.label in targets)] + [f"click {submit.ref}"]
    raise ValueError(f"task {task!r} is not one of {', '.join(TASKS)}")


def is_success(raw_reward: float) -> bool:
    """Won: the page's raw reward is exactly 1 (partial credit below 1 is a loss)."""
    return float(raw_reward) >= 1.0


def outcome_text(raw_reward: float) -> str:
    """What the agent reads when the page ends the episode."""
    if is_success(raw_reward):
        return "The page accepted your answer: task done."
    if raw_reward > 0:
        return f"The page ended the episode with partial credit {raw_reward:.2f}: not a success."
    return "The page ended the episode: wrong answer."
