# syntax=docker/dockerfile:1.7
# GPU image (rlanything-gpu): policy (rollout workers, trainer) and reward (judges, trainer)
# with vLLM on a GPU cluster. Build from the repository root:
#   docker build -f docker/gpu.Dockerfile -t ghcr.io/rlanything/rlanything-gpu:0.1.0 .
# The pod runs `python -m services.<name> --config /etc/rlanything/run.yaml` as user 10001 with
# a read-only root filesystem: every writable path (/tmp, /cache, /dev/shm, /checkpoints) is a volume.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04

FROM ${CUDA_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev gcc g++ \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# torch 2.13.0 from PyPI (the CUDA build; the CUDA libraries come as nvidia-* wheels).
RUN pip install torch==2.13.0
WORKDIR /src
COPY pyproject.toml README.md ./
COPY services ./services
COPY rlanything ./rlanything
RUN pip install '.[vllm]'
# Smoke test: every service module imports (pip check is not used: it flags the textworld
# wheel's platform tag although the wheel works).
RUN cd / && python -c "import services.env.service, services.policy.service, services.reward.service, services.critic.service"

FROM ${CUDA_IMAGE}
# Triton (used by vLLM and torch.compile) compiles small C launchers at run time: it needs a C
# compiler and the Python headers in the final image.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-dev gcc libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 rlanything \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin rlanything
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    XDG_CACHE_HOME=/cache \
    HF_HOME=/cache/huggingface \
    TRITON_CACHE_DIR=/cache/triton \
    TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
    VLLM_CACHE_ROOT=/cache/vllm \
    VLLM_CONFIG_ROOT=/tmp/vllm \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
WORKDIR /app
USER 10001:10001
EXPOSE 50051 9090 8000
CMD ["rlanything", "--help"]
