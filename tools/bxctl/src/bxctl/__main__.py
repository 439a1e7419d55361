"""`bxctl`: the entry point. User errors print one line and exit 1; never a traceback.

`--home DIR` (or `--home=DIR`) is taken wherever it stands, before or after the
command, as git takes `-C`: `bxctl --home X sessions list` and `bxctl sessions list
--home X` are the same. Output cut short by a closed pipe (`bxctl audit tail | head`)
ends quietly, as git's does.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as typing's: `bxctl --help` imports neither typing nor pathlib
if TYPE_CHECKING:
    from pathlib import Path


def take_home(argv: list[str]) -> tuple[list[str], Path | None]:
    """`argv` without its `--home` options, and the (last) home they gave.

    Options after a lone `--` are arguments, not options: they stay.
    """
    rest: list[str] = []
    home: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg == "--home" and i + 1 < len(argv):
            home = argv[i + 1]
            i += 2
            continue
        if arg.startswith("--home="):
            home = arg.removeprefix("--home=")
            i += 1
            continue
        rest.append(arg)
        i += 1
    if home is None:
        return rest, None
    from pathlib import Path

    return rest, Path(home)


def not_text(args: list[str]) -> str | None:
    """A sentence naming the first argument that is not UTF-8, or None if all are.

    The OS hands over bytes; Python keeps undecodable ones as lone surrogates, which no
    frame can carry (a home path may hold any bytes: `take_home` has already taken it).
    """
    from ._common import not_utf8

    for number, arg in enumerate(args, start=1):
        problem = not_utf8(arg)
        if problem is not None:
            return (
                f"argument {number} is not UTF-8 text ({problem}): boxmaker's messages, "
                "queries, ids and reasons are UTF-8; nothing was sent"
            )
    return None


def _command_errors(exc: BaseException) -> list[Exception] | None:
    """The CommandErrors in `exc` (possibly grouped by trio), or None if anything else."""
    from ._common import CommandError

    if isinstance(exc, CommandError):
        return [exc]
    if isinstance(exc, BaseExceptionGroup):
        found: list[Exception] = []
        for inner in exc.exceptions:
            errors = _command_errors(inner)
            if errors is None:
                return None
            found.extend(errors)
        return found
    return None


def main(argv: list[str] | None = None) -> int:
    """Run bxctl with `argv` (default: the process's arguments); return the exit code."""
    args, home = take_home(sys.argv[1:] if argv is None else argv)
    if args in ([], ["--help"], ["-h"]):
        from ._help import ROOT_HELP

        sys.stdout.write(ROOT_HELP)  # cyclopts' own text, without loading cyclopts
        return 0
    problem = not_text(args)
    if problem is not None:
        print(f"bxctl: {problem}", file=sys.stderr)
        return 1
    if home is not None:
        from . import _common

        # Every command resolves its home as the roles do; one given on the command
        # line is the owner's choice, repeated in the commands bxctl suggests.
        os.environ["BOXMAKER_HOME"] = str(home.expanduser())
        _common.remember_home(home)
    try:
        from ._quick import route

        quick = route(args)
        if quick is None:
            from ._app import app

            result = app(args, result_action="return_value")
        else:  # what cyclopts would call, without loading it (_quick)
            result = quick.command(*quick.args, **quick.kwargs)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except BaseException as exc:
        errors = _command_errors(exc)
        if errors is None:
            raise
        from ._common import inline

        for error in errors:
            print(f"bxctl: {inline(str(error))}", file=sys.stderr)
        return 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    return result if isinstance(result, int) else 0


def _quiet_stdout() -> None:
    """The reader left: send what is still buffered nowhere, so exit prints no error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
