"""loopd: sessions, the turn loop against the model, core tools and the chat socket."""

from ._config import Settings as Settings
from ._config import load_settings as load_settings
from ._service import Loopd as Loopd
