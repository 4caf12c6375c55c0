# syntax=docker/dockerfile:1
# GPU Reactor image: docker build -t ghcr.io/gpu-reactor/gpu-reactor:0.1.0 .
#
# Stage 1 builds wheels for the project and every dependency from pyproject.toml; stage 2
# installs them offline (--no-index), so the dependency list lives only in the project metadata.
ARG PYTHON_IMAGE=python:3.12-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reactor ./reactor
RUN python -m pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# The uid/gid match runAsUser/runAsGroup in deploy/reactor/deployment.yaml.
RUN groupadd --system --gid 10001 reactor \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin reactor
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-index --find-links=/wheels /wheels/gpu_reactor-*.whl
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 8081
ENTRYPOINT ["reactor"]
CMD ["serve", "--config", "/etc/gpu-reactor/policy.yaml"]
