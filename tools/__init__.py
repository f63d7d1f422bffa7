"""Developer tools of the cacheproof repository (not installed): mutation testing, the GPU check."""
