"""report: results as JSON-able dicts, rich tables and SVG plots."""
