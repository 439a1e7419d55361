"""boxmaker's benchmarks: each prints its figures beside the raw baseline of the same run."""
