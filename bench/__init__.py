"""`make bench`: the reactor measured side by side with its ceilings and with the naive approach.

Everything runs on 127.0.0.1: the embedded cluster in the bench process, the reactor and the
echo app as real gunicorn child processes, and the load generator as its own child process.
"""
