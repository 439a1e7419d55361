"""bxctl: the owner's command line for boxmaker.

Nothing is imported until it is used, so that `bxctl --help` and the one-request
commands start fast.
"""

TYPE_CHECKING = False  # as typing's, without importing typing for `bxctl --help`
if TYPE_CHECKING:
    from ._app import app as app
    from ._common import CommandError as CommandError


def __getattr__(name: str) -> object:
    """`app` and `CommandError`, imported on first use (PEP 562)."""
    if name == "app":
        from ._app import app

        return app
    if name == "CommandError":
        from ._common import CommandError

        return CommandError
    raise AttributeError(f"module 'bxctl' has no attribute {name!r}")
