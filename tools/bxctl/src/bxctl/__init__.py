"""bxctl: the owner's command line for boxmaker."""

from ._app import app as app
from ._common import CommandError as CommandError
