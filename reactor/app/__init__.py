"""Entry points: the `reactor` command line, the gunicorn runner, the assembly of the service, log formats."""
