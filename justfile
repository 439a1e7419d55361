# boxmaker's tasks. `just check` is the gate; CI runs exactly that (.ci/run).
set shell := ["bash", "-euo", "pipefail", "-c"]
export UV_LOCKED := "1"

[private]
default:
    @just --list --unsorted

# install every member and the dev tools into .venv
[group("env")]
sync:
    uv sync --all-packages --group dev

# format and autofix
[group("dev")]
fmt:
    uv run --group dev ruff format .
    uv run --group dev ruff check --fix .

[group("gate")]
[doc("formatting and lint (ruff)")]
lint:
    uv run --group dev ruff format --check .
    uv run --group dev ruff check .

[group("gate")]
[doc("strict type checks (mypy)")]
typecheck:
    uv run --group dev mypy

# extra args go to pytest: `just test -k frame -x`
[group("gate")]
test *args:
    uv run --group dev pytest -q {{ args }}

# The gate without the model: lint, types, every test, in two pytest workers (most
# end-to-end tests wait on processes and sockets; a file's tests share one worker).
[group("gate")]
[doc("the gate without the model: lint, types, every test (two workers)")]
check: lint typecheck (test "-n 2 --dist loadfile")

# The embedded model's tests against the real llama-cpp-python server. The first run
# compiles llama-cpp-python (several minutes, shown by uv); then its cache holds it.
[group("gate")]
[doc("the tests against the real embedded model (its first run compiles it)")]
check-model *args:
    uv run --group dev --group model pytest -q -s -m model tests/model {{ args }}

# a chaos day: the owner's day while roles are killed (not in the gate; a short one is):
# `just chaos --kills 100`
[group("bench")]
[doc("a chaos day: the owner's day while roles are killed: `just chaos --kills 100`")]
chaos *args:
    uv run --group dev python tests/chaos.py {{ args }}

# benchmarks (not in the gate): `just bench sockets`. With the model group, which
# `just bench cache` needs (the embedded model); the other benchmarks do not import it.
[group("bench")]
[doc("a benchmark, beside its raw baseline: `just bench sockets`")]
bench *args:
    uv run --group dev --group model python -m bench {{ args }}
