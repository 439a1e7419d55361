"""bxctl: the owner's command line for boxmaker."""
