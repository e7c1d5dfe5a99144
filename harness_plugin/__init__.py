"""artmem package (built in a later issue)."""
