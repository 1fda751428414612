"""A small logging reverse proxy: records what a client sends and what the
server answers, passing every byte through (streamed answers included).

Usage: python3 capture_proxy.py --port P --upstream http://127.0.0.1:S \
           --log FILE.jsonl --tag NAME [--port-file F]

Each request becomes one JSON line in FILE.jsonl (appended):
  tag, method, path, headers (Authorization redacted), body (parsed JSON,
  or text), status, response content-type, and for an error status the
  response body; for an SSE answer, any `data:` event carrying "error".
--port 0 picks a free port and writes it to --port-file. Standard library
only; one thread per connection; HTTP/1.1 keep-alive both ways.
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
    "trailer", "upgrade", "host", "content-length",
}

args = None
lock = threading.Lock()


def record(entry):
    line = json.dumps(entry, ensure_ascii=False)
    with lock, open(args.log, "a") as f:
        f.write(line + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # quiet
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def handle_any(self):
        body = self.read_body()
        up = urllib.parse.urlsplit(args.upstream)
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=600)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["Host"] = f"{up.hostname}:{up.port}"
        if body or self.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body))
        entry = {
            "t": time.time(),
            "tag": args.tag,
            "method": self.command,
            "path": self.path,
            "headers": {
                k: ("<redacted>" if k.lower() in ("authorization", "x-api-key") else v)
                for k, v in self.headers.items()
            },
        }
        if body:
            try:
                entry["body"] = json.loads(body)
            except ValueError:
                entry["body_text"] = body[:4000].decode("utf-8", "replace")
        try:
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            entry["status"] = 502
            entry["error"] = f"proxy: upstream unreachable: {e}"
            record(entry)
            self.send_error(502)
            return
        ctype = resp.getheader("Content-Type", "")
        entry["status"] = resp.status
        entry["content_type"] = ctype
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        if self.command == "HEAD" or resp.status in (204, 304):
            self.send_header("Content-Length", "0")
            self.end_headers()
            conn.close()
            record(entry)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "keep-alive")
        self.end_headers()
        kept = b""
        sse_errors = []
        pending = b""
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                if resp.status >= 400 and len(kept) < 8000:
                    kept += chunk
                if "event-stream" in ctype:
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.startswith(b"data:") and b'"error"' in line and len(sse_errors) < 3:
                            sse_errors.append(line[5:].strip().decode("utf-8", "replace"))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            entry["client_closed"] = True
            self.close_connection = True
        finally:
            conn.close()
        if kept:
            try:
                entry["response"] = json.loads(kept)
            except ValueError:
                entry["response_text"] = kept.decode("utf-8", "replace")
        if sse_errors:
            entry["sse_errors"] = sse_errors
        record(entry)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = handle_any


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--upstream", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--tag", default="")
    p.add_argument("--port-file")
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.port_file:
        with open(args.port_file + ".part", "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(args.port_file + ".part", args.port_file)
    print(f"capture_proxy: 127.0.0.1:{server.server_address[1]} -> {args.upstream}", file=sys.stderr)
    server.serve_forever()


if __name__ == "__main__":
    main()
