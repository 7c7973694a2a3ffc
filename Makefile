# Rhythm delivery. The two commands that matter: `make demo` and `make test`.
# Everything they need (Python tools, the local AWS emulator) is installed and started from this
# repository's own files.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv/bin

.PHONY: help demo test venv emulator-start emulator-stop lint-template lint build deploy-build deploy smoke bench bench-processes chaos fmt

help:
	@echo "make demo   - run the delivery pipeline end to end on the local emulator, then serve the console (DEMO_EXIT=1: end after the story)"
	@echo "make test   - formatting, template lint, unit, integration and browser tests (starts the emulator)"
	@echo "make lint   - clippy with warnings as errors"
	@echo "make build  - cargo lambda build --release --arm64 of every function"
	@echo "make deploy-build - the arm64 target (once) and \`sam build\` into .aws-sam/build"
	@echo "make deploy ENV=dev - sam deploy --config-env ENV of that build (dev, staging, prod)"
	@echo "make smoke  - smoke test of a running stack (RHYTHM_API_URL, RHYTHM_OPERATOR_TOKEN; SMOKE_ARGS: scripts/smoke.sh)"
	@echo "make bench  - pipeline benchmark on the local emulator"
	@echo "make bench-processes - the delivery functions' release binaries as processes: CPU per delivery (CHANGES=2000 RUNS=3)"
	@echo "make chaos  - the chaos run, large (CHANGES=5000 SUBSCRIPTIONS=3 SEED=1 WAVE=500; e.g. CHANGES=10000); JSON report in target/chaos/"

venv:
	@scripts/venv.sh

emulator-start: venv
	@scripts/emulator.sh start

emulator-stop:
	@scripts/emulator.sh stop

lint-template: venv
	$(VENV)/cfn-lint template.yaml
	$(VENV)/sam validate --lint --template template.yaml --region us-east-1

test:
	@scripts/test.sh

demo:
	@scripts/demo.sh

lint:
	cargo clippy --workspace --all-targets -- -D warnings

fmt:
	cargo fmt --all

build: venv
	PATH="$(CURDIR)/.venv/bin:$$PATH" cargo lambda build --release --arm64 --workspace --bins --exclude local

deploy-build:
	@scripts/deploy.sh build

deploy:
	@scripts/deploy.sh deploy "$(ENV)"

smoke:
	@scripts/smoke.sh $(SMOKE_ARGS)

bench:
	@scripts/bench.sh

bench-processes:
	@CHANGES=$(CHANGES) RUNS=$(RUNS) scripts/process-bench.sh

chaos:
	@CHANGES=$(CHANGES) SUBSCRIPTIONS=$(SUBSCRIPTIONS) SEED=$(SEED) WAVE=$(WAVE) scripts/chaos.sh
