"""fasteval."""
