"""report: results as JSON-able dicts, rich tables and SVG plots, one module per command (each
builds its command's dict and renders from it) and ``format`` for what they share."""
