"""Which job a pod belongs to, and the job's minimum number of members.

A training job is a group of pods scheduled all-or-nothing (a gang). The keys below are how the
controllers users run name that group; `docs/architecture.md` ("Jobs") lists their precedence.
"""

from __future__ import annotations

# pysched's own contract: any controller (or none) may set them.
JOB_LABEL = "pysched.io/job"
MIN_MEMBERS = "pysched.io/min-members"
# A member's part in a parameter-server job: "ps" or "worker".
ROLE_LABEL = "pysched.io/role"
