"""brokerd: owns {home}/grants, {home}/audit, the pending approvals and the tool runtimes.

It decides every tool call loopd sends against the grants, asks the owner where a grant
says `ask`, runs granted calls (recall and memory at memoryd, the rest in the configured
runtime) and records every decision in its signed audit log (before a call runs, and
its outcome after). It keeps each session's label from what it returned to it, so a
session cannot claim to be less tainted than brokerd knows it is.
"""

from ._config import Settings as Settings
from ._config import load_settings as load_settings
from ._service import Brokerd as Brokerd
