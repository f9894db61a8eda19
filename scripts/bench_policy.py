"""Policy benchmarks: Generate throughput over gRPC vs in-process, trainer step time, and the
time from announcing a version to a running worker serving it.

Usage: ``python scripts/bench_policy.py [MODEL_DIR] [OUT.md]`` (default: a tiny model built for
FrozenLake; ``bench/policy.md``). Everything is measured side by side in one run.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from rlanything.v1 import policy_pb2, policy_pb2_grpc  # noqa: E402
from rlanything.v1.events_pb2 import SamplingParams  # noqa: E402
from services.common.algo.batching import Sample  # noqa: E402
from services.common.bus import EventBus  # noqa: E402
from services.common.checkpoints import VersionStore, save_checkpoint  # noqa: E402
from services.common.config import ConsumerConfig, FamilyConfig, NatsConfig, PPOConfig, TinyModelConfig  # noqa: E402
from services.common.models.generation import HFGenerator, Sampling  # noqa: E402
from services.common.nats_server import NatsServer, free_port  # noqa: E402
from services.common.service_start import Started, start_service, wait_serving  # noqa: E402
from services.common.ppo_update import ppo_update  # noqa: E402
from services.env.families.frozenlake import FrozenLakeFamily  # noqa: E402
from services.policy.prompting import step_chat  # noqa: E402
from services.offline.policy_sft import build_tiny_for, demonstrations  # noqa: E402

BATCH, NEW_TOKENS, REPEATS = 16, 32, 8


def chats() -> list[list[dict[str, str]]]:
    episode = FrozenLakeFamily().make_episode(
        __import__("services.env.families.base", fromlist=["TaskSpec"]).TaskSpec(
            "gym_text", {"size": 4.0, "hole_prob": 0.2}, 1), 0)
    return [step_chat(episode.task_text, [], episode.observation, list(episode.admissible_actions))] * BATCH


def tokens_per_s(call) -> float:  # type: ignore[no-untyped-def]
    rates = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        n = call()
        rates.append(n / (time.perf_counter() - start))
    return statistics.median(rates)


async def version_propagation(nats_url: str, address: str, model_dir: Path, ckpt: Path) -> list[float]:
    bus = await EventBus.connect(NatsConfig(url=nats_url), ConsumerConfig(), name="bench")
    versions = await VersionStore.open(bus)
    stub = policy_pb2_grpc.PolicyStub(grpc.insecure_channel(address))
    gen = HFGenerator(str(model_dir))
    request = policy_pb2.GenerateRequest(prompts=[policy_pb2.Conversation(messages=[
        policy_pb2.ChatMessage(role="user", content="hi")])], sampling=SamplingParams(max_new_tokens=1))
    out = []
    for v in range(1, 4):
        path = save_checkpoint(gen.model, gen.tokenizer, ckpt, "policy", 100 + v)
        start = time.perf_counter()
        await versions.announce("policy", 100 + v, path, trained_on_round=v)
        while stub.Generate(request, timeout=10).model_version != 100 + v:
            await asyncio.sleep(0.01)
        out.append(time.perf_counter() - start)
    await bus.close()
    return out


def main(model_dir: Path | None, out_path: Path) -> None:
    """Run all measurements and write a markdown table."""
    tmp = Path(tempfile.mkdtemp(prefix="rla-bench-policy-"))
    if model_dir is None:
        fam = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})
        model_dir = build_tiny_for(demonstrations(FrozenLakeFamily(), fam, 50, 2), tmp / "tiny", TinyModelConfig())
    sampling = Sampling(temperature=1.0, max_new_tokens=NEW_TOKENS)
    gen = HFGenerator(str(model_dir))
    batch = chats()
    local = tokens_per_s(lambda: sum(len(c.token_ids) for c in gen.generate(batch, sampling)))

    port = free_port()
    rows: list[tuple[str, str]] = []
    with NatsServer() as nats:
        config = {"nats": {"url": nats.url}, "env": {"scheduler": {"enabled": False}},
                  "policy": {"role": "rollout", "openai_port": 0, "server": {"grpc_port": port},
                             "model": {"source": str(model_dir)}, "checkpoint_dir": str(tmp / "ckpt")}}
        (tmp / "run.yaml").write_text(yaml.safe_dump(config))
        proc = start_service("policy", tmp / "run.yaml", tmp / "policy.log")
        try:
            address = f"127.0.0.1:{port}"
            wait_serving([Started("policy", address, proc, tmp / "policy.log")], 300)
            stub = policy_pb2_grpc.PolicyStub(grpc.insecure_channel(address))
            request = policy_pb2.GenerateRequest(
                prompts=[policy_pb2.Conversation(messages=[policy_pb2.ChatMessage(**m) for m in c]) for c in batch],
                sampling=SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=NEW_TOKENS))
            remote = tokens_per_s(lambda: sum(len(c.token_ids) for c in stub.Generate(request, timeout=60).completions))
            lags = asyncio.run(version_propagation(nats.url, address, model_dir, tmp / "ckpt"))
        finally:
            proc.terminate()
            proc.wait()
    rows.append(("Generate, in-process (tokens/s, batch 16 × 32)", f"{local:.0f}"))
    rows.append(("Generate over gRPC (tokens/s, same batch)", f"{remote:.0f}"))
    rows.append(("gRPC / in-process throughput ratio", f"{remote / local:.2f}"))

    model = gen.model
    tok = gen.tokenizer
    prompt = tuple(gen.encode_chat(batch[0]))
    samples = [Sample(str(i), prompt, tuple(tok.encode("\\boxed{2}", add_special_tokens=False)), 1.0) for i in range(64)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        ppo_update(model, optimizer, samples, PPOConfig(optimizer_steps=4), tok.pad_token_id)
        times.append(time.perf_counter() - start)
    rows.append(("Trainer round: 64 samples, 4 optimizer steps + π_old recompute (s)", f"{statistics.median(times):.3f}"))
    rows.append(("Version announce → worker serving it (s, median of 3)", f"{statistics.median(lags):.3f}"))
    lines = ["# Policy benchmarks", "", f"Model: `{model_dir}` "
             f"({sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters); CPU, one run.", "",
             "| measurement | value |", "|---|---:|"] + [f"| {a} | {b} |" for a, b in rows]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "-" else None,
         Path(sys.argv[2]) if len(sys.argv) > 2 else Path("bench/policy.md"))
