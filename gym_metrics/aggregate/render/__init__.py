"""The aggregate-metrics file's rendering: group rows filled column-wise into byte templates
(native `_fill`, `_minify`, with the same bytes in Python when unbuilt), forked workers for the
groups, a background writer. Used by the engine in gym_metrics.aggregate only."""
