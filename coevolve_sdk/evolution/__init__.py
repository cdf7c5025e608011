"""The evolving task pool: signal detectors, teachers, validation, evolution rounds and their scheduler, the seed pool."""
