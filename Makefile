# Every target creates .venv and installs what it needs: no step by hand on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Three installs, each a stamp: the demo's (the `demo` extra: PyPI wheels and Java only, nothing that needs a
# system package), the suite's on top of it (the `dev` extra), and the gssapi package, which has no Linux wheel
# for every Python and builds against MIT Kerberos' headers: it waits for `krb5` (tests/unit/test_makefile.py
# holds both orders).
DEMO_STAMP := $(VENV)/.demo-installed
STAMP := $(VENV)/.installed
GSSAPI_STAMP := $(VENV)/.gssapi-installed

# `make` alone: the suite's virtual environment, everything but the Kerberos package.
.DEFAULT_GOAL := $(STAMP)

.PHONY: demo test test-compiled test-pure build lint typecheck docs reliability bench broker clean mutate kafka krb5 prerequisites

# Apache Kafka for the suite's reference cluster (kafkajet.testing.ApacheKafka): Maven copies the broker's and
# the tools' jars from Maven Central into an ignored cache the first time. The version is named once, in the pom.
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' jvm/pom.xml)
KAFKA_LIBS := .cache/apache-kafka-$(KAFKA_VERSION)

# The Kerberos tests run a local KDC (Debian's krb5-kdc, krb5-admin-server; krb5-user's kinit for the
# kafka-python referee; libkrb5-dev's krb5-config and headers, which the gssapi package builds against):
# `make test` installs them once with apt-get. The demo and the package need none of it. Without apt-get, the
# line below says what to install by hand, and the Kerberos tests fail naming it (they are never skipped).
KRB5_TOOLS := /usr/sbin/krb5kdc /usr/sbin/kdb5_util /usr/sbin/kadmin.local /usr/bin/kinit /usr/bin/krb5-config
KRB5_PACKAGES := krb5-kdc krb5-admin-server krb5-user libkrb5-dev
SUDO := $(shell test "$$(id -u)" = 0 || echo sudo)

# Before anything is installed: Python >= 3.11 for the package, Java 17 (or later) for Spark and the brokers.
prerequisites:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "make: kafkajet needs" \
	  "Python >= 3.11, and $(PYTHON) is $$($(PYTHON) --version 2>&1 || echo missing): run make PYTHON=python3.11" >&2; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -n 1); [ "$${v:-0}" -ge 17 ] || { \
	  echo "make: Spark and the brokers need Java 17 or later on PATH, and java is $${v:-missing}" \
	  "(Debian's package openjdk-17-jre-headless)" >&2; exit 1; }

# The editable install compiles the send path in place (hatch_build.py; pure Python without a compiler).
$(DEMO_STAMP): pyproject.toml hatch_build.py | prerequisites
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[demo]'
	touch $@

$(STAMP): $(DEMO_STAMP)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# After krb5 (an order, not just a listing: make -j keeps it); without krb5-config it says so and goes on.
$(GSSAPI_STAMP): $(STAMP) | krb5
	@if command -v krb5-config >/dev/null; then \
	  echo "$(PY) -m pip install --quiet -e '.[gssapi]'"; $(PY) -m pip install --quiet -e '.[gssapi]' && touch $@; \
	else echo "make: the gssapi package builds against MIT Kerberos' headers (krb5-config): install" \
	  "$(KRB5_PACKAGES) (Debian) by hand, or the Kerberos tests fail" >&2; fi

# Maven's output goes to a log shown only on failure: Maven 3.8's -q still writes bare colour resets (ESC[0m).
$(KAFKA_LIBS)/.complete: jvm/pom.xml
	@command -v mvn >/dev/null || { echo "make: fetching Apache Kafka $(KAFKA_VERSION) for the tests needs Maven" \
	  "(mvn; Debian: apt-get install maven) and Java 17" >&2; exit 1; }
	rm -rf $(KAFKA_LIBS).tmp && mkdir -p $(dir $(KAFKA_LIBS))
	mvn -q -B -Dstyle.color=never -f jvm/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS).tmp \
	  >$(KAFKA_LIBS).log 2>&1 || { cat $(KAFKA_LIBS).log; echo "make: Maven could not fetch Apache Kafka $(KAFKA_VERSION) from Maven Central (above); the tests" \
	  "on Apache Kafka need it: run \`make kafka\` again once the registry is reachable" >&2; exit 1; }
	rm -rf $(KAFKA_LIBS) && mv $(KAFKA_LIBS).tmp $(KAFKA_LIBS) && touch $@

kafka: $(KAFKA_LIBS)/.complete

krb5: prerequisites
	@for tool in $(KRB5_TOOLS); do test -x $$tool || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  if ! command -v apt-get >/dev/null; then \
	    echo "make: the Kerberos tests need MIT Kerberos' KDC and kinit ($(KRB5_PACKAGES) on Debian;" \
	      "krb5 on Fedora and Homebrew); install them by hand, or those tests fail" >&2; exit 0; fi; \
	  echo "installing $(KRB5_PACKAGES) with apt-get"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(SUDO) apt-get install -y -q $(KRB5_PACKAGES) >/dev/null || \
	  { $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q $(KRB5_PACKAGES) >/dev/null; } || \
	  { echo "make: apt-get could not install $(KRB5_PACKAGES)" >&2; exit 1; }; \
	fi

demo: $(DEMO_STAMP)
	$(PY) -m kafkajet demo

# Recompiles the send path in place if a compiled module's source changed since the last build (under a
# minute; nothing to do otherwise). Until then the checkout runs those modules' Python.
build: $(STAMP)
	$(PY) hatch_build.py

# Both builds: everything on the compiled one (a silent fallback to Python fails it), and on the pure-Python
# one the unit and mock tiers (byte-identity and codec tests) and the interop tier (kafka-python's and aiokafka's
# readers decoding the batches this build's producer writes, per codec). Side by side, each run's output printed
# whole when it ends. The compiled run spreads over 4 pytest-xdist workers: it mostly waits on brokers and JVMs
# (87 % of one core busy on average at 3 workers), so its 75 minutes of tests fit in about 20. A file's tests stay
# in one worker, and the Spark tests in two groups (tests/conftest.py); CONTRIBUTING.md has the figures.
# The system packages first, then every pip step: a sub-make, so no install can run before apt-get, even with -j.
test: krb5
	$(MAKE) --no-print-directory $(STAMP) $(GSSAPI_STAMP) lint typecheck docs build kafka
	$(MAKE) --no-print-directory -j2 --output-sync=target test-compiled test-pure

test-compiled:
	KAFKAJET_EXPECT_COMPILED=1 $(PY) -m pytest -q -n 4 --dist loadgroup
test-pure:
	KAFKAJET_NO_EXTENSIONS=1 $(PY) -m pytest -q -p no:cacheprovider tests/unit tests/mock tests/interop

lint: $(STAMP)
	$(VENV)/bin/ruff check kafkajet pyspark_kafkajet tests benchmarks tools hatch_build.py

typecheck: $(STAMP)
	$(VENV)/bin/mypy kafkajet pyspark_kafkajet

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on a broken link or API reference.
# docs/settings.md is generated from the config table: a key added without regenerating the page fails here.
# NO_MKDOCS_2_WARNING: the theme's end-of-life banner (raw colour codes in a CI log) says nothing about our docs.
docs: $(STAMP)
	@$(PY) -m kafkajet.config | diff -u docs/settings.md - || { echo "make: docs/settings.md differs from" \
	  "kafkajet/config's tables: python -m kafkajet.config > docs/settings.md" >&2; exit 1; }
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d site

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
	$(PYTHON) hatch_build.py clean
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis mutants
