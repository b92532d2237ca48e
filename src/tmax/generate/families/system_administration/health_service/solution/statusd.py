{{ oracle }}
import glob
import http.server
import json
import socketserver
import threading

LEVEL = {{ level }}


def load():
    texts = []
    for path in sorted(glob.glob("/app/health/*.log")):
        with open(path) as handle:
            texts.append(handle.read())
    return health_table(texts, LEVEL)


TABLE = load()


def describe(service):
    e = TABLE[service]
    return {"service": service, "state": e["state"], "failures": e["failures"],
            "availability": availability(e)}


class Line(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            words = raw.decode("utf-8", "replace").split()
            if words == ["LIST"]:
                reply = " ".join(sorted(TABLE))
            elif len(words) == 2 and words[0] == "STATUS" and words[1] in TABLE:
                d = describe(words[1])
                reply = f"{d['service']} {d['state']} {d['failures']} {d['availability']}"
            else:
                reply = "ERR unknown"
            self.wfile.write((reply + "\n").encode())


class Web(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if parts == ["health"]:
            body, code = {"ok": True, "services": len(TABLE)}, 200
        elif len(parts) == 2 and parts[0] == "status" and parts[1] in TABLE:
            body, code = describe(parts[1]), 200
        else:
            body, code = {"error": "not found"}, 404
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class TCP(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


line_server = TCP(("127.0.0.1", {{ line_port }}), Line)
threading.Thread(target=line_server.serve_forever, daemon=True).start()
http.server.ThreadingHTTPServer(("127.0.0.1", {{ http_port }}), Web).serve_forever()
