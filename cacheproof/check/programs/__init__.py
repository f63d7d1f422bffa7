"""Checking any spec kind by its call generator: Hypothesis draws a program of calls, each from the
model's current state, and every call runs on the model and the implementation side by side
(`cacheproof check --spec KIND`), the tensor cache's as every other kind's."""
