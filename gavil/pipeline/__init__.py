"""Running the pipeline: the stage registry and runner, the table catalog, code dependencies,
metrics files and ``dvc.yaml`` generation."""
