"""The run report: ``OUTPUT/report.html``, one self-contained page (plots inline as PNG)."""
