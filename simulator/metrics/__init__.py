"""Results: flat records into pandas DataFrames, and pure DataFrame -> figures/summaries."""
