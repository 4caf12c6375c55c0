"""From a pod named in an alert to the workload that owns it, every link checked by uid, selector and label."""
