"""A fake Mattermost server for tests; for now, Mattermost's mention rules.

`find_mentions` applies Mattermost's mention rules (its own Markdown parser and mention parser,
not CommonMark's) to a message.
"""

from ._mentions import Mentions, find_mentions

__all__ = ["Mentions", "find_mentions"]
