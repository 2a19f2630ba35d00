"""Figures (pure DataFrame -> plotly Figure functions) and the offline dashboards."""
