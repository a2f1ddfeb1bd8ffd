# syntax=docker/dockerfile:1
# Lattice operator image: build the wheel, install it into a slim runtime as a non-root user.
# Suits a read-only root filesystem (no bytecode writes, no runtime downloads).
# Reproducible: the build backend and every runtime dependency come from the hash-pinned lock
# files (`make lock`), so the same source gives the same packages.
#
# `docker build .` works as is (python:3.11-slim, wheels from PyPI). `make image`
# (hack/images/operator.sh) builds it offline with buildah: BASE_IMAGE is its own Debian bookworm
# Python, and PIP_NO_INDEX/PIP_FIND_LINKS point pip at the wheels it downloaded, mounted read-only.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE} AS build
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src
COPY requirements-build.lock ./
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements-build.lock
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /dist .

FROM ${BASE_IMAGE}
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock /tmp/requirements.lock
COPY --from=build /dist/*.whl /tmp/wheels/
RUN pip install --require-hashes --no-deps -r /tmp/requirements.lock \
    && pip install --no-deps /tmp/wheels/*.whl && rm -rf /tmp/wheels /tmp/requirements.lock \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin lattice
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["lattice", "run"]
