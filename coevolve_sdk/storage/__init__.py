"""What a run keeps on disk: the SQLite run store, checkpoints, the run folder's lock and layout, disk-space checks."""
