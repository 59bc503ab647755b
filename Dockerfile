# The environment-server image: `docker build -t gym-metrics .`, then
#   docker run --rm -p 50051:50051 gym-metrics                      # serves math_exact
#   docker run --rm -p 50051:50051 gym-metrics serve tool_calling --host 0.0.0.0
# Any gym-metrics command runs (the entrypoint is the CLI). Stop it with `docker stop -t 15` or
# more: docker's 10 s default is `--grace`'s own, no margin before its SIGKILL. Kubernetes: docs/kubernetes.md and
# deploy/kubernetes/. Your own environment: `FROM gym-metrics` and `pip install` its package.
#
# Environments that run model-written code (code_tests) need the sandbox's isolation, which
# fails closed: root in the container (a user of each run's own), bubblewrap (installed below)
# and the capabilities it uses, else the server refuses to start (docs/sandbox.md#deploy):
#   docker run --rm -p 50051:50051 --user 0 --cap-add SYS_ADMIN --cap-add NET_ADMIN \
#       --security-opt apparmor=unconfined gym-metrics serve code_tests --host 0.0.0.0
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what `pip install .` reads (see .dockerignore): the library, the built-in environments
# (gym_metrics_servers/) and the metadata pyproject.toml names.
WORKDIR /tmp/gym-metrics
COPY pyproject.toml README.md LICENSE ./
COPY gym_metrics ./gym_metrics
COPY gym_metrics_servers ./gym_metrics_servers
# A C compiler for the three native modules (gym_metrics/aggregate/render/_fill.c and _minify.c, the metrics
# file's rendering; gym_metrics/_util/jsonscan.c, input lines checked for depth before pyarrow
# reads them), removed in the same layer; without it the install falls back to Python. The check
# imports them with -P: the copied sources in this WORKDIR would hide the installed package.
# bubblewrap stays: the sandbox for model-written code needs it (see above).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev bubblewrap \
    && pip install . \
    && python -P -c "import gym_metrics.aggregate.render._fill, gym_metrics.aggregate.render._minify, gym_metrics._util.jsonscan" \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/* /tmp/gym-metrics

# Not root: an environment server needs no privilege (50051 is not a privileged port); one
# that runs model code in the sandbox is started as root (`--user 0`, above).
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/gym gym
USER 10001
WORKDIR /home/gym

EXPOSE 50051

# grpc.health.v1 Check on the default port, with the Python already in the image (no extra
# binary). It assumes the default --port 50051 and no TLS; change it (or run with
# --no-healthcheck) otherwise. Kubernetes ignores it and uses its own `grpc:` probes.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import sys, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; c = grpc.insecure_channel('127.0.0.1:50051'); s = g.HealthStub(c).Check(h.HealthCheckRequest(), timeout=3).status; sys.exit(0 if s == h.HealthCheckResponse.SERVING else 1)"]

# SIGTERM (docker stop, a pod's deletion) drains in-flight calls for --grace seconds (default 10).
ENTRYPOINT ["gym-metrics"]
CMD ["serve", "math_exact", "--host", "0.0.0.0"]
