# Every target creates .venv and installs what it needs: no step by hand on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck reliability bench broker clean mutate

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m kafkajet demo

test: $(STAMP) lint typecheck
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check kafkajet pyspark_kafkajet tests benchmarks tools

typecheck: $(STAMP)
	$(VENV)/bin/mypy kafkajet pyspark_kafkajet

reliability: $(STAMP)
	$(PY) -m pytest -q -m reliability -s

# Mutation testing of the producer's core (not part of `make test`): `make mutate MODULE=idempotence`.
mutate: $(STAMP)
	$(PY) -m pip install --quiet -e '.[mutate]'
	$(PY) tools/mutate.py $(MODULE)

bench: $(STAMP)
	$(PY) benchmarks/encode.py

broker: $(STAMP)
	$(PY) -m kafkajet broker

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis mutants
