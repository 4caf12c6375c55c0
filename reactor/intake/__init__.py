"""The HTTP face: the webhook's token, the Alertmanager payload validated into a Notification, the answer."""
