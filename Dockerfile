# syntax=docker/dockerfile:1
# Lattice operator image: build the wheel, install it into a slim runtime as a non-root user.
# Suits a read-only root filesystem (no bytecode writes, no runtime downloads).
# Reproducible: the build backend and every runtime dependency come from the hash-pinned lock
# files (`make lock`), so the same source gives the same packages.
FROM python:3.11-slim AS build
WORKDIR /src
COPY requirements-build.lock ./
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements-build.lock
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /dist .

FROM python:3.11-slim
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
