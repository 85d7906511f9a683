"""What the model sees: the analysis graph and the bounded observation built from it.

``state`` holds the analysis graph and renders it within a token budget; ``prompts``
builds each step's observation (question, files, protocol, graph, recent commands);
``budget`` counts and clips tokens; ``spaces`` are the text spaces of the env.
"""
