"""The foundation every layer stands on: errors, defaults, results, content blocks, schema helpers."""
