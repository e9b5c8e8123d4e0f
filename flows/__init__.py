"""Prefect flows and deployments over the same stage functions that dvc.yaml runs."""
