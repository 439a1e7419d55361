"""`just bench [NAME ...]`: run the named benchmarks (all when none is named)."""

from __future__ import annotations

import importlib
import sys

BENCHES = {
    "sockets": "bench.sockets",
    "index": "bench.index",
    "cli": "bench.cli",
    "turn": "bench.turn",
    "cache": "bench.cache",
    "forget": "bench.forget",
    "age": "bench.age",
    "recall-quality": "bench.recall_quality",
}


def main(argv: list[str]) -> int:
    """Run each named benchmark's `main(args)`; `--help` lists them."""
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: just bench [NAME [ARGS...]]\n\nbenchmarks: " + ", ".join(BENCHES))
        return 0
    names = [argv[0]] if argv else list(BENCHES)
    rest = argv[1:]
    for name in names:
        if name not in BENCHES:
            print(f"unknown benchmark {name!r}; known: {', '.join(BENCHES)}", file=sys.stderr)
            return 2
        module = importlib.import_module(BENCHES[name])
        module.main(rest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
