"""HTTP helpers the Python test programs share (tests/soak, tests/adversarial): one request to a local server."""
import http.client
import json


def request(port, method, path, body=None, key=None, raw=None, timeout=60):
    """Sends one request to 127.0.0.1:port and returns (status, parsed JSON or text). body is sent as JSON, raw
    as bytes as they are; key adds an 'Authorization: Bearer' header."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = "Bearer " + key
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        text = r.read()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text.decode(errors="replace")
    finally:
        conn.close()
