# The two commands of the README: `make demo` and `make test` (both as root on Debian/Ubuntu).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# python3-venv: the virtual environment; debootstrap, systemd-container, iproute2,
# openssh-client: the lab; librsvg2-bin, fonts-dejavu-core: PNG screenshots; tmux: trying the app.
APT_PACKAGES := python3-venv debootstrap systemd-container openssh-client iproute2 \
                librsvg2-bin fonts-dejavu-core tmux

.PHONY: deps venv demo lint test lab-up lab-down bench clean

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

venv: deps $(VENV)/.installed

demo: venv
	$(VENV)/bin/cockpit lab demo

# The house's habits: lint, format, types and the layers contract (pyproject.toml says which).
lint: venv
	$(VENV)/bin/ruff check cockpit tests benchmarks
	$(VENV)/bin/ruff format --check cockpit tests benchmarks
	$(VENV)/bin/mypy cockpit
	$(VENV)/bin/lint-imports

# The whole suite on a bookworm lab, then the lab tests of what differs between releases again
# on a trixie lab (systemd 257, Python 3.13, OpenSSH 10), as GPU hosts run both generations
# (tests/lab/conftest.py, EVERY_RELEASE). The real-SGLang lab runs once: SGLang's wheels are for
# bookworm's Python 3.11.
test: venv lint
	$(PY) -m pytest -p no:cacheprovider
	COCKPIT_LAB_RELEASE=trixie $(PY) -m pytest -p no:cacheprovider -m "every_release"

lab-up: venv
	$(VENV)/bin/cockpit lab up

lab-down: venv
	$(VENV)/bin/cockpit lab down

bench: venv
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) *.egg-info
