# syntax=docker/dockerfile:1
# Lattice operator image: build the wheel, install it into a slim runtime as a non-root user.
# Suits a read-only root filesystem (no bytecode writes, no runtime downloads).
FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.2.2
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m build --wheel --outdir /dist

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /dist/*.whl /tmp/wheels/
RUN pip install /tmp/wheels/*.whl && rm -rf /tmp/wheels \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin lattice
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["lattice", "run"]
