# The CPU image: Debian's Python 3.11 (the CPython the Triton 2.51 Python-backend stub of
# nvidia-pytriton embeds), the locked virtualenv, and this kit.  It serves the CPU engine
# with the same ensemble as the GPU image; the engine is built on first start into /opt/kit/build.
# Its Python packages are the Makefile's venv recipe (requirements/lock.txt, --no-deps), replayed
# through pip's resolver for Python 3.11 by tests/unit/test_image_packages.py.
FROM debian:bookworm-slim

RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends python3.11 python3.11-venv make gcc libc6-dev curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/kit
COPY Makefile pyproject.toml README.md ./
COPY requirements requirements
COPY contract contract
COPY build_engines build_engines
COPY model_repository model_repository
COPY serving serving
COPY client client
COPY bench bench
RUN make venv

EXPOSE 8000 8001 8002
CMD ["sh", "-c", "make build-engine && exec .venv/bin/python -m serving up --host 0.0.0.0"]
