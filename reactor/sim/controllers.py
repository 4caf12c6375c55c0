"""Placeholder, replaced below."""
class Controllers:
    def __init__(self, api):
        self.api = api
    def run_once(self):
        pass
