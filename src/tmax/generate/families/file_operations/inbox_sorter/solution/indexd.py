import http.server
import json
import os
import urllib.parse

ROOT = "/app/sorted"
MOVES = "/app/out/moves.tsv"


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body, kind="application/json"):
        data = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/categories":
            counts = {}
            for entry in sorted(os.listdir(ROOT)):
                if os.path.isdir(os.path.join(ROOT, entry)):
                    counts[entry] = sum(len(f) for _, _, f in os.walk(os.path.join(ROOT, entry)))
            return self.reply(200, json.dumps(counts))
        if url.path == "/where":
            wanted = urllib.parse.parse_qs(url.query).get("name", [""])[0]
            with open(MOVES, encoding="utf-8") as handle:
                for line in handle:
                    source, _, target = line.rstrip("\n").partition("\t")
                    if source == wanted:
                        return self.reply(200, target + "\n", "text/plain")
            return self.reply(404, "not found\n", "text/plain")
        return self.reply(404, "not found\n", "text/plain")

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", {{ port }}), Handler).serve_forever()
