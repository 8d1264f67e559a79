# syntax=docker/dockerfile:1
# One image for every Kadence component: each is a `kadence` subcommand (docs/deploy.md).
#
#   docker build -t kadence .
#   docker run --rm kadence processor --help
#   docker compose up -d          # the three-broker cluster and every component (docker-compose.yml)
#
# The runtime packages are requirements-image.lock: the versions `make test` ran with
# (requirements.lock), with their hashes. tests/unit/test_deployment.py parses this file with
# BuildKit's parser, lints it with hadolint and checks that everything it copies exists.

FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/kadence
COPY requirements-image.lock /tmp/requirements-image.lock
RUN /opt/kadence/bin/pip install --no-cache-dir --require-hashes --no-deps -r /tmp/requirements-image.lock
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sdk/ sdk/
COPY schemas/ schemas/
COPY topics/ topics/
COPY readmodels/ readmodels/
COPY storage/ storage/
COPY processors/ processors/
COPY gateway/ gateway/
COPY connectors/ connectors/
COPY cli/ cli/
COPY samples/ samples/
COPY testing/ testing/
COPY devstack/ devstack/
COPY operations/ operations/
RUN /opt/kadence/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
    && /opt/kadence/bin/kadence --help >/dev/null

FROM python:3.11-slim-bookworm
RUN groupadd --system --gid 10001 kadence \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/kadence --create-home kadence
COPY --from=build /opt/kadence /opt/kadence
# every component listens beyond loopback inside its container; the processor's shard store
# (scratch space: each shard is restored from Kafka when assigned) lives in /var/lib/kadence/state
ENV PATH=/opt/kadence/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    KADENCE_METRICS_HOST=0.0.0.0 \
    KADENCE_GATEWAY_HOST=0.0.0.0 \
    KADENCE_STATE_DIR=/var/lib/kadence/state
USER 10001:10001
WORKDIR /var/lib/kadence
EXPOSE 8080 9100
ENTRYPOINT ["kadence"]
CMD ["--help"]
