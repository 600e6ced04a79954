"""agentsynth-__name__: __description__"""
