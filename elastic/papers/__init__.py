"""Reproductions of the experiments of the papers Elastic is built from (one module per paper)."""
