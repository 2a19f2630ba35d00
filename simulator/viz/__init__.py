"""Figures (pure DataFrame -> plotly Figure functions) and the self-contained dashboards."""
