{{ oracle }}
import http.server
import sys
import urllib.parse

sys.path.insert(0, "/app")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        try:
            r, k, y0, h = (float(query[p]) for p in ("r", "k", "y0", "h"))
            ys = rk4_final(r, k, y0, h, int(query["steps"]))
            body, code = "%.6f\n" % ys[-1], 200
        except (KeyError, ValueError, ZeroDivisionError):
            body, code = "bad request\n", 400
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", {{ port }}), Handler).serve_forever()
