"""Models: loading (open_clip, sentence-transformers, MPNet from its part packages), precision and
device, embedding caches and the feature vectors the adversarial stages use."""
