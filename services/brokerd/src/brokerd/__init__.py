"""brokerd: owns {home}/grants, {home}/audit, the pending approvals and the tool runtimes.

It decides every tool call loopd sends against the grants, asks the owner where a grant
says `ask`, runs granted calls (recall and memory at memoryd, the rest in the configured
runtime) and appends one hash-chained audit record per decision.
"""

from ._config import Settings as Settings
from ._config import load_settings as load_settings
from ._service import Brokerd as Brokerd
