"""`reactor report`: what the rules and the policy would have done over a window of Prometheus history.

Read only: it needs a Prometheus that holds the cluster's dcgm-exporter history (and, where present,
kube-state-metrics' series), no Kubernetes access and no installed GPU Reactor rules. The rules' own expressions,
rendered from the values file (rules/thresholds.yaml), are evaluated with range queries (expressions.py), their
`for` and `keep_firing_for` replayed (firing.py), and each would-be notification goes through the reactor's own
`decide` (replay.py). Modules: source (the query interface), collect (the queries), owners, build (the
accounting), mig, render_text / render_json / render_html, schema.json.
"""
