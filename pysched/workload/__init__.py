"""Training workloads: jobs with hidden true speed models, the model catalogue, progress and traces.

One module for the simulator and the emulator. The scheduler never imports it: what it knows of a
job is what the pod says (requests and `pysched.io/*` annotations).
"""
