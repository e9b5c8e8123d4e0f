"""Pipeline stages: one module per stage, each with a pure core and ``run(params) -> metrics``."""
