"""Undo the last AdamW step in place, from the gradients it used: no copy of weights or optimizer state.

The PPO trust region (`services.common.ppo_update`) undoes a single optimizer step that takes the
minibatch's KL above ``max_kl``. Copying the weights and AdamW's two moment buffers before every
step to make that possible costs 12 bytes per parameter (84 GB for a 7B model) per step. AdamW's
step is invertible from what is still in memory after it — the gradients ``p.grad`` it read, the
new moments and the step count — so the undo costs no copy at all.

One AdamW step (`torch.optim.AdamW`, Loshchilov & Hutter 2019; torch's `_single_tensor_adam`
with ``decoupled_weight_decay``), for a parameter p with gradient g at step t (after t += 1):

    p  ← p·(1 − lr·λ)
    m  ← β1·m + (1 − β1)·g
    v  ← β2·v + (1 − β2)·g²
    p  ← p − lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + ε)

Its inverse, in reverse order:

    p  ← (p + lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + ε)) / (1 − lr·λ)
    m  ← (m − (1 − β1)·g) / β1
    v  ← max(0, (v − (1 − β2)·g²) / β2)
    t  ← t − 1

Exact in real arithmetic; in float32 the restored weights agree to about 1e-6 relative (measured
in tests/unit/common/test_adamw_undo.py).
"""

from __future__ import annotations

import math

import torch

__all__ = ["undo_adamw_step"]


@torch.no_grad()
def undo_adamw_step(optimizer: torch.optim.Optimizer) -> int:
    """Reverse ``optimizer``'s last ``step()`` in place; returns how many parameters were restored.

    Call it before the gradients change (no ``zero_grad``/``backward`` in between) and with the
    same ``lr`` in each param group as the step used.

    Raises:
        TypeError: ``optimizer`` is not `torch.optim.AdamW` (or `Adam` with decoupled weight decay).
        ValueError: a param group uses ``amsgrad`` or ``maximize`` (not invertible here), or a
            parameter that has optimizer state has no gradient.
    """
    if not isinstance(optimizer, torch.optim.Adam):
        raise TypeError(f"undo_adamw_step needs torch.optim.AdamW, got {type(optimizer).__name__}")
    restored = 0
    for group in optimizer.param_groups:
        if group.get("amsgrad") or group.get("maximize"):
            raise ValueError("undo_adamw_step: amsgrad and maximize are not supported "
                             f"(amsgrad={group.get('amsgrad')}, maximize={group.get('maximize')})")
        decoupled = isinstance(optimizer, torch.optim.AdamW) or group.get("decoupled_weight_decay", False)
        if group["weight_decay"] and not decoupled:
            raise TypeError("undo_adamw_step: Adam with L2 weight decay is not supported (use AdamW)")
        beta1, beta2 = group["betas"]
        lr, eps, wd = float(group["lr"]), group["eps"], group["weight_decay"]
        for p in group["params"]:
            state = optimizer.state.get(p)
            if not state or "step" not in state:
                continue
            if p.grad is None:
                raise ValueError("undo_adamw_step: a parameter with optimizer state has no gradient "
                                 "(were the gradients zeroed after the step?)")
            t = int(state["step"])
            if t < 1:
                continue
            m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
            bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
            denom = (v.sqrt() / math.sqrt(bc2)).add_(eps)
            p.addcdiv_(m, denom, value=lr / bc1)
            if wd:
                p.div_(1 - lr * wd)
            m.sub_(g, alpha=1 - beta1).div_(beta1)
            v.addcmul_(g, g, value=-(1 - beta2)).div_(beta2).clamp_(min=0)
            if torch.is_tensor(state["step"]):
                state["step"].sub_(1)
            else:
                state["step"] = t - 1
            restored += 1
    return restored
