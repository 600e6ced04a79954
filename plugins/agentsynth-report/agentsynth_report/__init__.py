"""agentsynth-report: look at runs in a browser (a static HTML report and a local web app)."""

__version__ = "0.1.0"
