#!/usr/bin/env bash
# Makes (once) the project's Python virtual environment and prints its directory: the packages of
# examples/python-orders (SQLAlchemy 2, psycopg 3 (binary) and confluent-kafka, pinned in its
# requirements.txt) and the tools of scripts/python-tools-requirements.txt (kubernetes-validate, for
# the Helm chart's tests; fastavro, requests, protobuf, grpcio-tools and jsonschema, for
# confluent-kafka's registry deserializers in brokers/schema's interop tests; pulsar-client, for
# the typed Pulsar Avro consumer of the same tests). They come from PyPI as binary wheels (no compiler needed). A second run
# with the same requirements only checks a stamp file. Needs python3 with the venv module (Debian:
# apt-get install python3-venv). Location: $PYTHON_ORDERS_VENV, else
# $SERVICES_STATE_DIR/venv-python-orders (default /var/tmp/outboxkit-services/venv-python-orders).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reqs=("$root/examples/python-orders/requirements.txt" "$root/scripts/python-tools-requirements.txt")
: "${SERVICES_STATE_DIR:=/var/tmp/outboxkit-services}"
venv="${PYTHON_ORDERS_VENV:-$SERVICES_STATE_DIR/venv-python-orders}"
stamp="$venv/.outboxkit-requirements"

# One build at a time: go test runs packages in parallel, and several of them call this script
# (examples/python-orders, brokers/schema); a second caller waits here, then finds the stamp.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cat "${reqs[@]}" | cmp -s - "$stamp"; then
  echo "$venv"
  exit 0
fi
# python3 and its venv module (with ensurepip) from Debian when missing and we may install.
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "python-env.sh: installing python3 and python3-venv from Debian" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv >&2 || { echo "python-env.sh: apt-get install python3 python3-venv failed" >&2; exit 1; }
  else
    echo "python-env.sh: python3 with its venv module is needed (apt-get install python3 python3-venv)" >&2
    exit 1
  fi
fi
mkdir -p "$(dirname "$venv")"
rm -rf "$venv" # a half-made environment from an interrupted run
if ! python3 -m venv "$venv" >&2; then
  echo "python-env.sh: python3 -m venv $venv failed" >&2
  exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
  -r "${reqs[0]}" -r "${reqs[1]}" >&2
cat "${reqs[@]}" >"$stamp"
echo "$venv"
