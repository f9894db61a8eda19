"""The web family's page logic on DOM trees shaped like MiniWoB++'s `core.getDOMInfo()`: the text
the agent reads, the actions it may choose, the scripted experts, and what counts as a win."""

from __future__ import annotations

from typing import Any

import pytest

from services.env.families.web_page import (TASKS, admissible_actions, expert_plan, flatten_dom, is_success,
                                            outcome_text, render_page)


def node(ref: int, tag: str, text: str = "", children: list[dict[str, Any]] | None = None, **extra: Any
         ) -> dict[str, Any]:
    return {"ref": ref, "tag": tag, "text": text, "children": children or [], "id": "", "classes": "", **extra}


def body(*children: dict[str, Any]) -> dict[str, Any]:
    return node(1, "BODY", children=[node(2, "DIV", children=[node(3, "DIV", children=list(children), id="area")],
                                          id="wrap")])


CHECKBOXES = body(
    node(4, "DIV", id="boxes", children=[
        node(5, "LABEL", children=[node(6, "INPUT_checkbox", id="ch0", value=False), node(-1, "t", "abc")]),
        node(7, "LABEL", children=[node(8, "INPUT_checkbox", id="ch1", value=True), node(-2, "t", "xy")]),
        node(9, "LABEL", children=[node(10, "INPUT_checkbox", id="ch2", value=False), node(-3, "t", "q1")]),
        node(11, "LABEL", children=[node(12, "INPUT_checkbox", value=False), node(-4, "t", "save")]),  # distractor
    ]),
    node(13, "BUTTON", "Submit", id="subbtn"))


def test_the_page_reads_as_refs_tags_texts_and_states() -> None:
    page = body(node(4, "BUTTON", "ok"), node(5, "DIV", "lorem ipsum"), node(6, "SPAN", "dolor", classes="alink"),
                node(7, "INPUT_text", id="tt", value="Kas", focused=True))
    assert render_page('Click on the "ok" button.', flatten_dom(page)) == "\n".join([
        'Instruction: Click on the "ok" button.', "Page:", '[4] button "ok"', '[5] div "lorem ipsum"',
        '[6] link "dolor"', '[7] input_text value="Kas" (focused)'])


def test_a_checkbox_line_carries_its_label_and_state_once() -> None:
    text = render_page("Select abc and click Submit.", flatten_dom(CHECKBOXES))
    assert text.splitlines()[2:] == ['[6] input_checkbox "abc" unchecked', '[8] input_checkbox "xy" checked',
                                     '[10] input_checkbox "q1" unchecked', '[12] input_checkbox "save" unchecked',
                                     '[13] button "Submit"']


def test_admissible_actions_click_what_can_be_used_and_type_each_quoted_text_into_each_field() -> None:
    page = body(node(4, "DIV", "Username"), node(5, "INPUT_text", id="username", value=""),
                node(6, "INPUT_password", id="password", value=""), node(7, "BUTTON", "Login", id="subbtn"))
    actions = admissible_actions('Enter the username "ann" and the password "x9" and press login.', flatten_dom(page))
    assert actions == ("click 5", "click 6", "click 7", 'type 5 "ann"', 'type 5 "x9"', 'type 6 "ann"', 'type 6 "x9"')
    assert len(admissible_actions('"a" "b"', flatten_dom(page), max_actions=3)) == 3


def test_click_checkboxes_expert_toggles_exactly_the_wrong_boxes_then_submits() -> None:
    elements = flatten_dom(CHECKBOXES)
    assert expert_plan("click-checkboxes", "Select abc, q1 and click Submit.", elements) == [
        "click 6", "click 8", "click 10", "click 13"]
    assert expert_plan("click-checkboxes", "Select xy and click Submit.", elements) == ["click 13"]
    assert expert_plan("click-checkboxes", "Select nothing and click Submit.", elements) == ["click 8", "click 13"]


def test_typing_experts_skip_what_is_already_typed() -> None:
    page = body(node(4, "INPUT_text", id="username", value="ann"), node(5, "INPUT_password", id="password", value=""),
                node(6, "BUTTON", "Login", id="subbtn"))
    utterance = 'Enter the username "ann" and the password "x9" into the text fields and press login.'
    assert expert_plan("login-user", utterance, flatten_dom(page)) == ['type 5 "x9"', "click 6"]
    form = body(node(4, "INPUT_text", id="tt", value=""), node(5, "BUTTON", "Submit", id="subbtn"))
    assert expert_plan("enter-text", 'Enter "Kasey" into the text field and press Submit.', flatten_dom(form)) == [
        'type 4 "Kasey"', "click 5"]


def test_click_experts_pick_the_quoted_target_and_say_none_when_it_is_missing() -> None:
    page = body(node(4, "BUTTON", "no"), node(5, "BUTTON", "yes"), node(6, "SPAN", "dolor", classes="alink"),
                node(7, "INPUT_text", id="tt"))
    elements = flatten_dom(page)
    assert expert_plan("click-button", 'Click on the "yes" button.', elements) == ["click 5"]
    assert expert_plan("click-link", 'Click on the link "dolor".', elements) == ["click 6"]
    assert expert_plan("focus-text", "Focus into the textbox.", elements) == ["click 7"]
    assert expert_plan("click-button", 'Click on the "cancel" button.', elements) is None
    with pytest.raises(ValueError, match="'draw-circle' is not one of"):
        expert_plan("draw-circle", "", elements)
    assert set(TASKS) >= {"click-button", "click-link", "focus-text", "enter-text", "click-checkboxes", "login-user"}


@pytest.mark.parametrize(("raw", "won"), [(1.0, True), (0.999, False), (0.33, False), (0.0, False), (-1.0, False)])
def test_only_a_full_raw_reward_is_a_win_partial_credit_is_not(raw: float, won: bool) -> None:
    assert is_success(raw) is won
    assert ("partial credit" in outcome_text(raw)) is (0 < raw < 1)
