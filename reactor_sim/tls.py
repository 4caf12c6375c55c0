"""HTTPS for the embedded API server: a throwaway self-signed certificate for 127.0.0.1/localhost.

kubectl (client-go's clientcmd) sends a kubeconfig's credentials only to an https server, so RBAC mode
needs TLS to be usable from kubectl. The certificate is made with the `openssl` command, once per cluster.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path


class Certificate:
    """A self-signed certificate and key in a private temporary folder (removed by `cleanup`)."""

    def __init__(self) -> None:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RuntimeError("TLS for the embedded cluster needs the `openssl` command on PATH")
        self._dir = tempfile.TemporaryDirectory(prefix="sim-tls-")
        folder = Path(self._dir.name)
        self.cert_file, self.key_file = folder / "apiserver.crt", folder / "apiserver.key"
        subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-days", "2", "-subj", "/CN=sim-apiserver",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", str(self.key_file), "-out", str(self.cert_file)],
                       check=True, capture_output=True, timeout=30)

    @property
    def pem(self) -> bytes:
        return self.cert_file.read_bytes()

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def cleanup(self) -> None:
        self._dir.cleanup()
