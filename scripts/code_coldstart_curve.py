"""Held-out success of the tiny policy's cold start against SFT steps, for a code-family setting.

Usage: ``python scripts/code_coldstart_curve.py OUT_DIR [dotted.key=value ...]`` (overrides of
``configs/coding.yaml``; env ``CHUNK``: steps between measurements, default 100; ``FROM``: first step
measured). Trains the tiny policy on the cold start's demonstrations (the run's held-out and OOD
functions skipped) and, every ``CHUNK`` steps, plays the run's held-out tasks of the family's knobs
(``heldout_slots`` of seed ``seed``, 4 answers each at temperature 0.8) and prints one JSON line:
``{"steps": N, "heldout": success, "s": seconds}``. Each chunk starts a fresh AdamW (its moments
reset), unlike the single loop of `rlanything run`'s cold start.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

from services.common.config import load_config
from services.common.models.generation import HFGenerator
from services.env.disjoint import eval_specs
from services.env.families.registry import build_family
from services.offline.policy_sft import build_tiny_for, demonstrations, success_rate, supervised_train
from services.run.coldstart import held_out_keys


def main(out: Path, overrides: list[str]) -> None:
    torch.set_num_threads(1)
    cfg = load_config(Path("configs/coding.yaml"), overrides)
    fam_cfg = cfg.env.families[0]
    family = build_family(fam_cfg, cfg.env.cache_dir, cfg.env.sandbox)
    knobs = {k: float(v) for k, v in fam_cfg.knobs.items()}
    specs = [s for s in eval_specs(cfg.env.families, cfg.seed) if s.knobs == knobs]
    start = time.time()
    demos = demonstrations(family, fam_cfg, cfg.policy.sft.episodes, cfg.policy.rollout.history_steps,
                           held_out_keys(cfg, family))
    print(json.dumps({"train_functions": len({d.response for d in demos}), "heldout_tasks": len(specs),
                      "heldout_functions": len({family.instance_key(s) for s in specs})}), flush=True)
    generator = HFGenerator(str(build_tiny_for(demos, out, cfg.policy.model.tiny, 0)))
    torch.manual_seed(0)
    chunk, first = int(os.environ.get("CHUNK", "100")), int(os.environ.get("FROM", "0"))
    for done in range(0, cfg.policy.sft.steps, chunk):
        supervised_train(generator, demos, cfg.policy.sft.model_copy(update={"steps": chunk}), seed=done)
        if done + chunk < first:
            continue
        held = success_rate(generator, family, specs, group_size=4, max_new_tokens=cfg.env.scheduler.max_new_tokens)
        print(json.dumps({"steps": done + chunk, "heldout": round(held, 3), "s": round(time.time() - start)}),
              flush=True)
    family.close()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: code_coldstart_curve.py OUT_DIR [dotted.key=value ...]")
    main(Path(sys.argv[1]), sys.argv[2:])
