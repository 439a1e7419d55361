"""memoryd: owns {home}/memory and {home}/index.

It serves the memory block to loopd, recall and memory edits to brokerd, and reindex
to the owner.
"""

from ._config import Settings as Settings
from ._config import load_settings as load_settings
from ._inprocess import on_home as on_home
from ._service import Memoryd as Memoryd
