"""``coevolve experiment``: many runs of one base config (arms × seeds) and their comparison.

An experiment never trains anything itself: every arm × seed is an ordinary ``coevolve run``
in its own subprocess and run folder, so each can be inspected, reported and resumed with the
usual commands, and this process never imports torch.

Modules: ``spec`` (the experiment file), ``presets`` (the paper's arms), ``runs`` (reading a
run folder without writing to it), ``runner`` (the subprocesses) and ``child`` (their entry
point, which dies with the runner), ``stats`` (Student-t intervals), ``summary``
(summary.json/csv/md), ``plots`` and ``page`` (experiment.html). docs/experiments.md is the guide.
"""
