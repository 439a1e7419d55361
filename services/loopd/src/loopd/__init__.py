"""loopd: sessions, the turn loop and the model connection."""
