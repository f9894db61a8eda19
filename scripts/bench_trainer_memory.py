"""Peak trainer memory during one PPO update of SmolLM2-135M-Instruct, against its inference footprint.

Usage: ``python scripts/bench_trainer_memory.py [OUT.md] [--label TEXT]`` (default
``bench/trainer_memory.md``). Each measurement runs in a fresh child process: the resident set size
(RSS) is sampled every 2 ms (psutil) from just before the model is loaded, and the figure is the
peak RSS during the measured phase minus the RSS before the load (the interpreter and the
libraries), in bytes per model parameter.

* ``inference``: load the policy as the rollout worker does (`HFGenerator`) and generate 32 new
  tokens for 8 prompts of ~190 tokens (greedy).
* ``ppo``: load it as the policy trainer does (`PPOLearner`: AdamW over the weights, a frozen
  reference copy for ``ref_beta``) and run one `ppo_update` over 16 samples of 192 prompt + 32
  response tokens with the default config's trust region (``max_kl`` 0.1, ``ref_beta`` 0.1),
  2 optimizer steps (minibatches of 8).

The samples are synthetic token ids (the memory of an update depends on shapes, not on text).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT, RESPONSE, SAMPLES = 192, 32, 16
TRAINERS = {
    "ppo": ({}, "one pass a minibatch, resident reference"),
    "ppo-micro": ({"micro_batch_tokens": 1024}, "micro_batch_tokens 1024 (4 rows a pass)"),
    "ppo-lean": ({"micro_batch_tokens": 256, "gradient_checkpointing": True, "reference": "reload"},
                 "micro_batch_tokens 256, gradient_checkpointing, reference reload"),
    "ppo-lean-fixed": ({"micro_batch_tokens": 256, "gradient_checkpointing": True, "reference": "reload",
                        "malloc_mmap_threshold": 131072},
                       "as ppo-lean, glibc's mmap threshold fixed at 128 KiB"),
    "lora": ({"lora": {"rank": 16, "alpha": 32}}, "LoRA r=16 on every linear layer, one pass a minibatch"),
    "lora-lean": ({"lora": {"rank": 16, "alpha": 32}, "micro_batch_tokens": 256, "gradient_checkpointing": True},
                  "LoRA r=16, micro_batch_tokens 256, gradient_checkpointing"),
}
"""Trainer settings measured, each on top of the default trust region: PPOConfig overrides and a note."""
INFERENCE = {"inference": "generate 32 tokens for 8 prompts of ~190 tokens",
             "inference-fixed": "as inference, glibc's mmap threshold fixed at 128 KiB (as a process that trains)"}
"""Generation measured: as a rollout worker (glibc's dynamic threshold) and as a process that also trains
(PPOLearner fixes the threshold, ``ppo.malloc_mmap_threshold``): its effect on generation speed."""
MODES = (*INFERENCE, *TRAINERS)


class PeakRSS:
    """Samples this process's RSS (bytes) every ``every_s`` seconds in a thread; ``peak`` is the largest seen."""

    def __init__(self, every_s: float = 0.002) -> None:
        import psutil

        self._proc = psutil.Process()
        self.every_s = every_s
        self.peak = self._proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(self.every_s)

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def _samples(vocab: int):
    import torch

    from services.common.algo.batching import Sample

    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(SAMPLES):
        ids = torch.randint(10, vocab - 10, (PROMPT + RESPONSE,), generator=g).tolist()
        out.append(Sample(f"s{i}", tuple(ids[:PROMPT]), tuple(ids[PROMPT:]), 1.0 if i % 2 else -1.0))
    return out


def child(mode: str, cache_dir: str) -> dict:
    """One measurement in this (fresh) process; returns figures as a dict."""
    import psutil
    import torch

    from services.common.config import PPOConfig
    from services.common.models.generation import HFGenerator, Sampling

    torch.manual_seed(0)
    gc.collect()
    base = psutil.Process().memory_info().rss
    with PeakRSS() as load_peak:
        gen = HFGenerator("smollm2", cache_dir, threads=2)
    params = sum(p.numel() for p in gen.model.parameters())
    loaded = psutil.Process().memory_info().rss
    started = time.perf_counter()
    if mode in INFERENCE:
        if mode == "inference-fixed":
            from services.common.allocator import fix_mmap_threshold

            fix_mmap_threshold(131072)
        chat = [{"role": "user", "content": "You are on a frozen lake. " * 24 + "Answer with \\boxed{n}."}]
        with PeakRSS() as peak:
            gen.generate([chat] * 8, Sampling(max_new_tokens=32, temperature=0.0))
        extra: dict = {}
    else:
        from services.common.trainer import PPOLearner

        ppo = PPOConfig(lr=1e-5, optimizer_steps=2, max_kl=0.1, ref_beta=0.1, merge_duplicates=False,
                        **TRAINERS[mode][0])
        with PeakRSS() as peak:
            learner = PPOLearner(gen, ppo, Path(cache_dir) / "bench-ckpt", reference_source="smollm2")
            metrics = learner_update(learner, _samples(gen.model.config.vocab_size))
        extra = {"optimizer_steps": metrics["ppo/optimizer_steps"], "kl_max": metrics.get("ppo/kl_max", 0.0)}
    return {"mode": mode, "params": params, "base_rss": base, "load_peak": load_peak.peak - base,
            "loaded": loaded - base, "peak": max(peak.peak, load_peak.peak) - base,
            "seconds": time.perf_counter() - started, **extra}


def learner_update(learner, samples) -> dict:
    """One `ppo_update` exactly as `PPOLearner.learn` calls it (synchronous mode: π_old recomputed)."""
    from services.common.ppo_update import ppo_update

    return ppo_update(learner.generator.model, learner.optimizer, samples, learner.ppo,
                      learner.generator.tokenizer.pad_token_id, True, learner.reference, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="bench/trainer_memory.md")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default=".cache/models")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES),
                        help="measure only these (the table keeps every row of the run)")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.cache_dir)))
        return
    from services.common.models.loading import resolve_model_path

    resolve_model_path("smollm2", args.cache_dir)  # convert the GGUF once, outside the measurements
    results = {}
    for mode in args.modes:
        print(f"measuring {mode} ...", flush=True)
        done = subprocess.run([sys.executable, __file__, "--child", mode, "--cache-dir", args.cache_dir],
                              capture_output=True, text=True, check=True)
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    write(Path(args.out), results)
    print(Path(args.out).read_text())


def write(out: Path, results: dict) -> None:
    params = next(iter(results.values()))["params"]
    infer = results["inference"]["peak"] if "inference" in results else float("nan")
    lines = [
        "# Trainer memory: one PPO update of SmolLM2-135M-Instruct (`make bench`)",
        "",
        f"`scripts/bench_trainer_memory.py`, {platform.machine()} CPU, torch fp32, {params:,} parameters. "
        "Peak resident memory of a fresh process during the phase, minus its memory before the model was "
        "loaded; every figure from the same run.",
        "",
        "| phase | peak (MB) | bytes / parameter | × inference | notes |",
        "|---|---|---|---|---|",
    ]
    update = f"one update: {SAMPLES} samples × ({PROMPT}+{RESPONSE}) tokens, 2 steps, max_kl 0.1, ref_beta 0.1, "
    notes = {**INFERENCE, **{mode: update + note for mode, (_, note) in TRAINERS.items()}}
    for mode, note in notes.items():
        if mode not in results:
            continue
        r = results[mode]
        lines.append(f"| {mode} | {r['peak'] / 1e6:,.0f} | {r['peak'] / params:.1f} | {r['peak'] / infer:.2f} | "
                     f"{note}; weights loaded: {r['loaded'] / params:.1f} B/param; {r['seconds']:.1f} s |")
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
