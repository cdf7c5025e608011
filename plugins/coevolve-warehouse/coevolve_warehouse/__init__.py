"""The warehouse world: a small tool-use environment where learning and data evolution can be
seen on a CPU (see docs/warehouse.md)."""
