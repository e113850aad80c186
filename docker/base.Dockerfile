# The base image every bundled task builds FROM, and the stand-in for public base images
# (ubuntu:*, debian:*, python:*-slim) that cannot be pulled offline.
# BASE is debian:bookworm-slim when it can be had, else a rootfs imported from debootstrap.
ARG BASE=debian:bookworm-slim
FROM ${BASE}

# Only reaches the network when the rootfs lacks these (the debian:bookworm-slim path).
RUN set -e; \
    if ! command -v python3 >/dev/null || ! python3 -c 'import pytest' 2>/dev/null \
       || ! command -v ps >/dev/null || ! command -v find >/dev/null; then \
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            bash coreutils findutils procps python3 python3-pytest ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# Task Dockerfiles written for Ubuntu images often `pip install` into the system Python.
RUN printf '[global]\nbreak-system-packages = true\n' > /etc/pip.conf

RUN set -e; \
    if ! id -u user >/dev/null 2>&1; then useradd -m -u 1000 -s /bin/bash user; fi; \
    mkdir -p /home/user && chown 1000:1000 /home/user && chmod 755 /home/user

ENV LANG=C.UTF-8
WORKDIR /home/user
CMD ["bash"]
