# syntax=docker/dockerfile:1.7
# CPU image (rlanything-cpu): env and critic on every cluster; policy and reward on the CPU
# overlay (tiny models). Build from the repository root:
#   docker build -f docker/cpu.Dockerfile -t ghcr.io/rlanything/rlanything-cpu:0.1.0 .
# The pod runs `python -m services.<name> --config /etc/rlanything/run.yaml` as user 10001 with
# a read-only root filesystem: every writable path (/tmp, /cache) is a volume.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# CPU torch first: a plain `torch` from PyPI is the multi-GB CUDA build. `pip install .` then
# sees torch==2.13.0 satisfied by 2.13.0+cpu.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
WORKDIR /src
COPY pyproject.toml README.md ./
COPY services ./services
COPY rlanything ./rlanything
RUN pip install .
# Smoke test: every service module imports (pip check is not used: it flags the textworld
# wheel's platform tag although the wheel works).
RUN cd / && python -c "import services.env.service, services.policy.service, services.reward.service, services.critic.service, selenium, miniwob"

FROM ${PYTHON_IMAGE}
# Debian's Chromium and chromedriver for the env service's `web` family (docs/web.md): headless
# browsers that play MiniWoB++ pages. About 380 MB installed (chromium 290, chromium-common 66,
# chromium-driver 25; Debian 12 package sizes) plus the libraries they pull in. One browser takes
# about 0.6 GiB (PSS, bench/web_env.md): raise the env pod's memory limit to cover `browsers` of them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium chromium-driver \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 rlanything \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin rlanything
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    XDG_CACHE_HOME=/cache \
    HF_HOME=/cache/huggingface
WORKDIR /app
# Numeric user, so the kubelet can check runAsNonRoot.
USER 10001:10001
EXPOSE 50051 9090
CMD ["rlanything", "--help"]
