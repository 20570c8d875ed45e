# A threaded HTTP server on the loopback (Python's ThreadingHTTPServer: one thread per
# connection, the interpreter's locks underneath). Serves DIR on an ephemeral port, prints
# "port N", and shuts itself down when its stdin closes (the test closes it once its clients
# are done: a timer alone fired before a loaded machine had served them), or after SECONDS at
# the latest so a test never leaves it running.
import functools, http.server, sys, threading

seconds, directory = float(sys.argv[1]), sys.argv[2]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def on_stdin_closed():
    sys.stdin.read()
    srv.shutdown()


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=directory))
guard = threading.Timer(seconds, srv.shutdown)
guard.daemon = True
guard.start()
threading.Thread(target=on_stdin_closed, daemon=True).start()
print("port", srv.server_address[1], flush=True)
srv.serve_forever()
srv.server_close()
print("stopped", flush=True)
