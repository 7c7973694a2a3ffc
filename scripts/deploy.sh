#!/usr/bin/env bash
# The deploy path, the same on a developer's machine and a CI runner:
#
#   scripts/deploy.sh build          # `make deploy-build`: the arm64 functions, into .aws-sam/build
#   scripts/deploy.sh deploy <env> [sam deploy options]
#                                    # `make deploy ENV=<env>`: sam deploy --config-env <env> of that build
#
# `build` installs the pinned Python tools (the SAM CLI, cargo-lambda, zig: scripts/venv.sh) and the
# Rust aarch64-unknown-linux-gnu target, then runs `sam build`. The target is added here, once and
# before the build, because samconfig.toml builds the six functions in parallel and each
# `cargo lambda build --arm64` would otherwise try to add the missing target at the same moment
# (all but one fail with "File exists"). A rust-toolchain.toml listing the target would not help:
# the six builds would still race to install it, and every debug build and test run of the
# workspace would then pull the arm64 standard library too.
#
# `deploy` deploys what `build` left in .aws-sam/build (CI builds once and hands that directory to
# each stage); the environments and their parameters are samconfig.toml's.
set -euo pipefail
export SAM_CLI_TELEMETRY=0
cd "$(dirname "$0")/.."
readonly TARGET=aarch64-unknown-linux-gnu

usage() {
  echo "usage: scripts/deploy.sh build | deploy <dev|staging|prod|default> [sam deploy options]" >&2
  exit 2
}

ensure_target() {
  command -v rustup >/dev/null || {
    echo "deploy: rustup not found; the arm64 build needs Rust installed with rustup" >&2
    exit 1
  }
  if rustup target list --installed | grep -qx "$TARGET"; then
    echo "deploy: Rust target $TARGET already installed"
  else
    echo "deploy: installing the Rust target $TARGET (once, before the parallel build)"
    rustup target add "$TARGET"
  fi
}

# The SAM CLI, cargo-lambda and zig come from the project's venv.
export PATH="$PWD/.venv/bin:$PATH"

case "${1:-}" in
  build)
    scripts/venv.sh
    ensure_target
    sam build
    ;;
  deploy)
    env=${2:-}
    [ -n "$env" ] || usage
    [ -f .aws-sam/build/template.yaml ] || {
      echo "deploy: no build in .aws-sam/build; run \`make deploy-build\` first" >&2
      exit 1
    }
    scripts/venv.sh
    # Anything after the environment goes to sam deploy (CI: --role-arn, --s3-bucket).
    sam deploy --config-env "$env" "${@:3}"
    ;;
  *) usage ;;
esac
