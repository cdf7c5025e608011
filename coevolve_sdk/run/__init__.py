"""One run from start to end: the loop, evaluation, progress, the report and what a hook may see."""
