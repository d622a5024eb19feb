# Everyday commands, each one line calling an existing script (the README's first two commands stay the
# scripts themselves: this file is a convenience). `make help` lists the targets.
.PHONY: help setup test quick prova chat up down bench synth

help: ## this list
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 10
setup: ## set up a fresh machine (virtualenv, PostgreSQL binaries, CDK CLI)
	./scripts/setup.sh
test: ## the whole test suite, three layers (what CI runs)
	./scripts/test.sh
quick: ## the unit layer only (no local stack)
	./scripts/test.sh -m "not stack and not infra"
prova: ## the main job: both designs against the insistent model, real debits counted
	./scripts/prova.sh
chat: ## chat as a WhatsApp customer through the local stack
	./scripts/conversa.py
up: ## start the local stack
	./scripts/local-stack up
down: ## stop the local stack (checks no process or port is left)
	./scripts/local-stack down
bench: ## the benchmark (minutes); stores the run and rewrites docs/performance.md's block
	.venv/bin/python scripts/bench.py --write-docs
synth: ## synthesize the CDK app offline (no credentials)
	npx cdk synth --quiet
