"""`bxctl`: the entry point. User errors print one line and exit 1; never a traceback."""

from __future__ import annotations

import sys

from ._app import app
from ._common import CommandError, inline


def _command_errors(exc: BaseException) -> list[CommandError] | None:
    """The CommandErrors in `exc` (possibly grouped by trio), or None if anything else."""
    if isinstance(exc, CommandError):
        return [exc]
    if isinstance(exc, BaseExceptionGroup):
        found: list[CommandError] = []
        for inner in exc.exceptions:
            errors = _command_errors(inner)
            if errors is None:
                return None
            found.extend(errors)
        return found
    return None


def main(argv: list[str] | None = None) -> int:
    """Run bxctl with `argv` (default: the process's arguments); return the exit code."""
    try:
        result = app(sys.argv[1:] if argv is None else argv, result_action="return_value")
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:
        errors = _command_errors(exc)
        if errors is None:
            raise
        for error in errors:
            print(f"bxctl: {inline(str(error))}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
