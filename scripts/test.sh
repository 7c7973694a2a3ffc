#!/usr/bin/env bash
# `make test`: formatting, the template linters, the import-cycle checks, then every unit and
# integration test of the workspace against the local emulator (started here, stopped at the
# end). The integration tests include the API contract test (local/tests/it/contract.rs:
# schemathesis, from .venv-contract, which scripts/venv.sh installs, generates requests from
# openapi.yaml and checks every answer) and run each function's real binary, and the deployed
# stack's smoke test (scripts/smoke.sh) against the served local stack (local/tests/it/smoke.rs).
set -euo pipefail
export SAM_CLI_TELEMETRY=0
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "test: cargo not found; install Rust (rustup)" >&2; exit 1; }
scripts/venv.sh
# The receiver's guide's examples (examples/), which the integration tests run.
scripts/examples.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== template lint (cfn-lint, sam validate --lint)"
.venv/bin/cfn-lint template.yaml
.venv/bin/sam validate --lint --template template.yaml --region us-east-1 >/dev/null
echo "== template security scan (checkov; skips and why in .checkov.yaml)"
.venv-checkov/bin/checkov --config-file .checkov.yaml --file template.yaml
echo "== deploy pipeline (actionlint on .github/workflows; cfn-lint and checkov on deploy/deploy-role.yaml)"
PATH="$PWD/.venv/bin:$PATH" .venv/bin/actionlint
.venv/bin/cfn-lint deploy/deploy-role.yaml
.venv-checkov/bin/checkov --config-file .checkov.yaml --file deploy/deploy-role.yaml
echo "== import cycles (shared: files, depth 1 and 2; domain, local and console: files)"
python3 scripts/import_cycles.py
python3 scripts/import_cycles.py --depth 1
python3 scripts/import_cycles.py --depth 2
python3 scripts/import_cycles.py --src domain/src
python3 scripts/import_cycles.py --src local/src
python3 scripts/import_cycles.py --src console/src
echo "== cited paths (every repository path the docs and module headers name exists)"
python3 scripts/cited_paths.py
echo "== stored items (no whole item written outside shared/src/store/)"
python3 scripts/stored_literals.py
# The integration tests run each function's real binary (local/tests/it/lambda_binaries.rs); a
# test cannot build them itself, as `cargo test` holds cargo's build lock.
echo "== function binaries (cargo build)"
cargo build --workspace --lib --bins --tests
echo "== cargo test (unit + integration against the emulator)"
log=$(mktemp)
status=0
scripts/with-emulator.sh cargo test --workspace --lib --bins --tests --no-fail-fast -- --test-threads="${TEST_THREADS:-4}" 2>&1 | tee "$log" || status=$?
# The domain's doc examples: the typed ids' `compile_fail` examples (a wrong kind of id refused).
cargo test -p domain --doc 2>&1 | tee -a "$log" || status=$?
# The criterion benchmarks run once each in test mode, so they keep compiling and working.
benches=$(cargo test --quiet -p shared --bench core 2>&1 | grep -c '^Success') || status=$?
echo "benchmarks: ${benches:-0} ran once in test mode"
# The web console in Debian's headless Chromium against the served local stack (installs
# Chromium and the pinned Playwright on first use; screenshots into docs/).
echo "== browser tests (local/browser, headless Chromium)"
browser_log=$(mktemp)
scripts/browser-tests.sh -q 2>&1 | tee "$browser_log" || status=$?
# One closing line for the whole workspace (cargo prints one per test binary, the last of which
# may be a binary without tests).
# pytest's closing line (`N passed, M failed in Ts`) adds the browser tests.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     FILENAME == ARGV[2] && / in [0-9.]+s/ { for (i = 2; i <= NF; i++) { if ($i ~ /^passed,?$/) p += $(i-1); if ($i ~ /^(failed|errors?),?$/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log" "$browser_log"
rm -f "$log" "$browser_log"
exit "$status"
