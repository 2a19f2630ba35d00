"""Many jobs on one cluster: placement policies, job traces and the cluster scheduler."""
