#!/usr/bin/python3
"""The real-browser Web eID test's two helpers.

usage: webeid_browser_rig.py extension DIR PAGE_URL
         writes an unpacked MV3 extension into DIR that behaves as the Web eID extension's native
         side (one native port per action, at most 5 s for the host's version, one command, one
         reply, disconnect), opens PAGE_URL once it is installed, and prints its extension id
         (from the public key in its manifest).
       webeid_browser_rig.py serve DIR NONCE RESULT_FILE PORT_FILE
         serves the login page over HTTPS on 127.0.0.1 (DIR holds cert.pem and key.pem), writes
         its port to PORT_FILE, and exits after the page POSTs its result (written to RESULT_FILE)
         or after 120 s."""
import base64
import hashlib
import http.server
import json
import os
import ssl
import sys
import threading

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

BACKGROUND = r"""
// One native port per action, as the Web eID extension does.
chrome.runtime.onInstalled.addListener(() => { chrome.tabs.create({ url: PAGE_URL }); });
chrome.runtime.onMessage.addListener((message, sender, sendResponse) => {
  const port = chrome.runtime.connectNative("eu.webeid");
  let stage = "version";
  const done = (answer) => { if (stage === "done") return; stage = "done"; clearTimeout(timer); try { port.disconnect(); } catch (e) {} sendResponse(answer); };
  const timer = setTimeout(() => done({ failure: "no version within 5 s" }), 5000);
  port.onMessage.addListener((reply) => {
    if (stage === "version") {
      clearTimeout(timer);
      if (typeof reply.version !== "string" || parseInt(reply.version, 10) < 2) { done({ failure: "bad version " + JSON.stringify(reply) }); return; }
      stage = "command";
      // The origin is the page's, as the browser reports it, never the page's claim.
      const argumentsWithOrigin = Object.assign({}, message.arguments, { origin: new URL(sender.url).origin });
      port.postMessage({ command: message.command, arguments: argumentsWithOrigin });
    } else {
      done({ version: stage, reply: reply });
    }
  });
  port.onDisconnect.addListener(() => done({ failure: "disconnected: " + (chrome.runtime.lastError ? chrome.runtime.lastError.message : "") }));
  return true;
});
"""

CONTENT = r"""
window.addEventListener("message", (event) => {
  if (event.source !== window || !event.data || event.data.webeidTest !== "request") return;
  chrome.runtime.sendMessage({ command: event.data.command, arguments: event.data.arguments }, (answer) => {
    window.postMessage({ webeidTest: "answer", answer: answer || { failure: String(chrome.runtime.lastError && chrome.runtime.lastError.message) } }, "*");
  });
});
document.documentElement.dataset.webeidTest = "ready";
"""

PAGE = """<!doctype html><html><head><title>authd Web eID test</title></head><body><script>
window.addEventListener("message", (event) => {
  if (event.source !== window || !event.data || event.data.webeidTest !== "answer") return;
  fetch("/result", { method: "POST", body: JSON.stringify({ origin: location.origin, answer: event.data.answer }) });
});
const ask = () => window.postMessage({ webeidTest: "request", command: "authenticate", arguments: { challengeNonce: NONCE, lang: "en" } }, "*");
if (document.documentElement.dataset.webeidTest === "ready") ask();
else fetch("/result", { method: "POST", body: JSON.stringify({ origin: location.origin, answer: { failure: "the content script is not there" } }) });
</script></body></html>"""


def extension(directory, page_url):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    # Chromium's id: the first 128 bits of SHA-256 of the public key, hex digits written a–p.
    extension_id = "".join(chr(ord("a") + int(digit, 16)) for digit in hashlib.sha256(public).hexdigest()[:32])
    os.makedirs(directory, exist_ok=True)
    manifest = {
        "manifest_version": 3, "name": "authd Web eID test", "version": "1.0", "key": base64.b64encode(public).decode(),
        "permissions": ["nativeMessaging"], "background": {"service_worker": "background.js"},
        "content_scripts": [{"matches": ["https://127.0.0.1/*"], "js": ["content.js"], "run_at": "document_start"}],
    }
    with open(os.path.join(directory, "manifest.json"), "w") as handle:
        json.dump(manifest, handle)
    with open(os.path.join(directory, "background.js"), "w") as handle:
        handle.write("const PAGE_URL = %s;\n" % json.dumps(page_url) + BACKGROUND)
    with open(os.path.join(directory, "content.js"), "w") as handle:
        handle.write(CONTENT)
    print(extension_id)


def serve(directory, nonce, result_file, port_file):
    page = PAGE.replace("NONCE", json.dumps(nonce)).encode()
    finished = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(min(length, 1 << 20))
            with open(result_file + ".part", "wb") as handle:
                handle.write(body)
            os.rename(result_file + ".part", result_file)
            self.send_response(204)
            self.end_headers()
            finished.set()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(port_file + ".part", "w") as handle:
        handle.write(str(server.server_address[1]))
    os.rename(port_file + ".part", port_file)
    finished.wait(120)
    server.shutdown()
    sys.exit(0 if finished.is_set() else 1)


if sys.argv[1] == "extension":
    extension(sys.argv[2], sys.argv[3])
elif sys.argv[1] == "serve":
    serve(*sys.argv[2:6])
else:
    sys.exit("unknown mode")
