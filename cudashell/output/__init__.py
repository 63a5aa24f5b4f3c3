"""Results and how they are shown: a Result per kind, text and tables, CSV, JSON Lines, HTML, figures."""
