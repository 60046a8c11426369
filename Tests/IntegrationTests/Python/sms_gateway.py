#!/usr/bin/python3
"""A stand-in SMS gateway for tests: accepts POSTs, appends "AUTH <header>\\nBODY <json>" to a
log file, and answers 500 while a file named `down` exists in its directory.

usage: sms_gateway.py DIRECTORY   (writes the port it listens on, on 127.0.0.1, to DIRECTORY/port)"""
import http.server
import os
import sys

directory = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(os.path.join(directory, "requests.log"), "a") as log:
            log.write("AUTH %s\nTYPE %s\nBODY %s\n" % (self.headers.get("Authorization"), self.headers.get("Content-Type"), body.decode()))
        down = os.path.exists(os.path.join(directory, "down"))
        self.send_response(500 if down else 202)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(os.path.join(directory, "port.tmp"), "w") as port:
    port.write(str(server.server_address[1]))
os.rename(os.path.join(directory, "port.tmp"), os.path.join(directory, "port"))
server.serve_forever()
