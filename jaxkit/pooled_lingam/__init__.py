"""Pooled LiNGAM: causal discovery pooled over environments (Shimizu et al.); the
``jaxkit lingam`` commands and the ``pooled-lingam`` pipeline."""
