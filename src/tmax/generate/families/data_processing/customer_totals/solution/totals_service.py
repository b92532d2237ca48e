{{ oracle }}
LEVEL = {{ level }}

import glob
import http.server
import json

texts = []
for path in sorted(glob.glob("/app/exports/*.csv")):
    with open(path) as handle:
        texts.append(handle.read())
TOTALS, COUNTS = customer_totals(texts, LEVEL)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "customer" and parts[1] in TOTALS:
            c = parts[1]
            body = {"customer": c, "total": money(TOTALS[c]), "count": COUNTS[c]}
            code = 200
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


http.server.ThreadingHTTPServer(("127.0.0.1", {{ port }}), Handler).serve_forever()
