"""Experiments: files that expand into runs, a runner that carries them out
in labs and records every run's metrics, and reports with statistics."""
