"""`undo_adamw_step` restores the weights and AdamW's state of before the step, without a copy."""

from __future__ import annotations

import copy

import pytest
import torch

from services.common.adamw_undo import undo_adamw_step


def _model_and_optimizer(weight_decay: float, steps: int, seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=weight_decay)
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model, opt, x, y


def _step(model, opt, x, y) -> None:
    opt.zero_grad()
    (torch.nn.functional.mse_loss(model(x), y) * 3).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("steps_before", [0, 1, 5])
def test_undo_restores_weights_moments_and_step_count(weight_decay: float, steps_before: int) -> None:
    model, opt, x, y = _model_and_optimizer(weight_decay, steps_before)
    weights = copy.deepcopy(model.state_dict())
    state = copy.deepcopy(opt.state_dict()["state"])
    _step(model, opt, x, y)
    moved = max(float((model.state_dict()[k] - w).abs().max()) for k, w in weights.items())
    assert moved > 1e-4  # the step did move the weights
    assert undo_adamw_step(opt) == 4
    for k, w in weights.items():
        torch.testing.assert_close(model.state_dict()[k], w, rtol=1e-5, atol=1e-6)
    after = opt.state_dict()["state"]
    for i, s in state.items():
        assert int(after[i]["step"]) == int(s["step"]) == steps_before
        torch.testing.assert_close(after[i]["exp_avg"], s["exp_avg"], rtol=1e-4, atol=1e-7)
        torch.testing.assert_close(after[i]["exp_avg_sq"], s["exp_avg_sq"], rtol=1e-4, atol=1e-9)
    for i in set(after) - set(state):  # the first step created the state: it is back to step 0, zeros
        assert int(after[i]["step"]) == 0
        assert float(after[i]["exp_avg"].abs().max()) < 1e-7 and float(after[i]["exp_avg_sq"].max()) < 1e-9


def test_the_next_step_after_an_undo_is_the_step_that_was_undone() -> None:
    model, opt, x, y = _model_and_optimizer(0.01, 3)
    twin = copy.deepcopy(model)
    twin_opt = torch.optim.AdamW(twin.parameters(), lr=3e-3, weight_decay=0.01)
    twin_opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # (load_state_dict would share the tensors)
    _step(model, opt, x, y)
    undo_adamw_step(opt)
    _step(model, opt, x, y)
    _step(twin, twin_opt, x, y)
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_other_optimizers_and_settings_are_refused_by_name() -> None:
    model = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match="SGD"):
        undo_adamw_step(torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="amsgrad=True"):
        undo_adamw_step(torch.optim.AdamW(model.parameters(), amsgrad=True))
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    with pytest.raises(ValueError, match="no gradient"):
        undo_adamw_step(opt)
