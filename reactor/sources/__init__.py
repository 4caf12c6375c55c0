"""What the reactor asks of the monitoring stack: Alertmanager's API (which alerts fire now) and Prometheus's
query API (what the rules measure now). Outbound clients only; nothing here is served."""
