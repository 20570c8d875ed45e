#!/usr/bin/env python3
"""A threaded file server for the SchedTask live measurement (docs/schedtask.md).

Python's own http.server (ThreadingHTTPServer: one thread per connection) with HTTP/1.1
keep-alive, so each client connection keeps one server thread that reads files and writes them
to its socket (read/sendto in a loop: a syscall-heavy thread role).

    python3 scripts/schedtask-fileserver.py 8765 /tmp/st-files &
    curl -s -o /dev/null 'http://127.0.0.1:8765/f[1-20]'   # one connection, 20 files
"""
import functools
import http.server
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: schedtask-fileserver.py PORT DIRECTORY")
    port, root = int(sys.argv[1]), sys.argv[2]
    handler = functools.partial(Handler, directory=root)
    http.server.ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()


if __name__ == "__main__":
    main()
