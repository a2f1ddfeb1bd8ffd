"""Unit tests of the API models, the structural-schema converter and CRD generation."""
