"""mattermostd: the owner talks to boxmaker, and approves its memory, from Mattermost."""

from ._bridge import Bridge as Bridge
from ._config import Settings as Settings
from ._config import load_settings as load_settings
