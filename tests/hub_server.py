#!/usr/bin/env python3
"""hub_server.py ROOT PORT_FILE LOG [LIFETIME_S] — a local stand-in for the Hugging Face hub (127.0.0.1)
for tests/test_pull.sh, answering as the hub does: GET /api/models/ORG/REPO/revision/REV lists the files;
HEAD/GET /ORG/REPO/resolve/REV/FILE answers an LFS file (.gguf, .nemo, .safetensors) with a 302 to
/lfs/ORG/REPO/FILE carrying X-Repo-Commit, X-Linked-Etag (its sha256) and X-Linked-Size, a small file
with 200, its git blob hash as ETag and X-Repo-Commit; /lfs/... serves the bytes with ETag and Range.
The repositories are ROOT/ORG/REPO/ (at the commit COMMIT below, also named "main").

The first path segment picks a behaviour (HF_ENDPOINT=http://127.0.0.1:PORT/MODE):
  ok      as the hub
  cut     the first body of each file stops halfway and the connection closes (a resume completes it)
  badsha  the body differs in one byte from the file whose sha256 is announced
  auth    401 without "Authorization: Bearer sesame" (X-Error-Code: GatedRepo), else as ok
  slow    bodies trickle (16 KiB per 20 ms) and stop after 3 s (Ctrl-C tests)
  steady  bodies come in 512 KiB pieces every 20 ms (two pulls at once)
Missing files, repositories or revisions are 404 with X-Error-Code; the organisation "renamed" answers
with a 307 to the same path under "nvidia" (a renamed repository). Every request is a line of LOG
("MODE METHOD PATH RANGE"). The server ends by itself after LIFETIME_S (default 60) seconds.
"""
import hashlib
import http.server
import json
import os
import sys
import threading
import time

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "sesame"
LFS_SUFFIXES = (".gguf", ".nemo", ".safetensors")


class Hub:
    def __init__(self, root, log):
        self.root, self.log_path = root, log
        self.lock = threading.Lock()
        self.cut_done = set()
        self.sha = {}

    def log(self, line):
        with self.lock, open(self.log_path, "a") as f:
            f.write(line + "\n")

    def sha256(self, path):
        with self.lock:
            if path not in self.sha:
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for b in iter(lambda: f.read(1 << 20), b""):
                        h.update(b)
                self.sha[path] = h.hexdigest()
            return self.sha[path]


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    hub = None

    def log_message(self, fmt, *args):  # the request log is LOG's
        pass

    def do_HEAD(self):
        self.route(head=True)

    def do_GET(self):
        self.route(head=False)

    def error(self, code, error_code, message):
        body = json.dumps({"error": message}).encode()
        self.send_response(code)
        self.send_header("X-Error-Code", error_code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.head:
            self.wfile.write(body)

    def route(self, head):
        self.head = head
        parts = self.path.split("?")[0].split("/")[1:]
        mode = parts[0] if parts else ""
        rest = parts[1:]
        self.hub.log(f"{mode} {self.command} /{'/'.join(rest)} {self.headers.get('Range', '-')}")
        if mode not in ("ok", "cut", "badsha", "auth", "slow", "steady"):
            return self.error(404, "UnknownMode", f"no mode {mode}")
        if mode == "auth" and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.error(401, "GatedRepo", "Access to this model is restricted: log in")
        if rest[:1] == ["renamed"] or rest[2:3] == ["renamed"]:  # a renamed repository: 307 to nvidia/
            moved = [x if x != "renamed" else "nvidia" for x in rest]
            self.send_response(307)
            self.send_header("Location", f"/{mode}/" + "/".join(moved))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if len(rest) >= 6 and rest[:2] == ["api", "models"] and rest[4] == "revision":
            return self.listing(rest[2], rest[3], rest[5])
        if len(rest) >= 5 and rest[2] == "resolve":
            return self.resolve(mode, rest[0], rest[1], rest[3], "/".join(rest[4:]))
        if len(rest) >= 4 and rest[0] == "lfs":
            return self.lfs(mode, rest[1], rest[2], "/".join(rest[3:]))
        return self.error(404, "NotFound", "no such route")

    def repo_dir(self, org, repo, rev):
        d = os.path.join(self.hub.root, org, repo)
        if not os.path.isdir(d):
            self.error(404, "RepoNotFound", f"Repository {org}/{repo} not found")
            return None
        if rev not in ("main", COMMIT):
            self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return d

    def listing(self, org, repo, rev):
        d = self.repo_dir(org, repo, rev)
        if d is None:
            return
        files = sorted(os.path.relpath(os.path.join(dp, n), d) for dp, _, ns in os.walk(d) for n in ns)
        body = json.dumps({"id": f"{org}/{repo}", "sha": COMMIT,
                           "siblings": [{"rfilename": f} for f in files]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.head:
            self.wfile.write(body)

    def resolve(self, mode, org, repo, rev, name):
        d = self.repo_dir(org, repo, rev)
        if d is None:
            return
        path = os.path.join(d, name)
        if ".." in name.split("/") or not os.path.isfile(path):
            return self.error(404, "EntryNotFound", f"{name} does not exist on {rev}")
        if name.endswith(LFS_SUFFIXES):
            sha = self.hub.sha256(path)
            self.send_response(302)
            self.send_header("Location", f"/{mode}/lfs/{org}/{repo}/{name}")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{sha}"')
            self.send_header("X-Linked-Size", str(os.path.getsize(path)))
            self.send_header("ETag", f'W/"{git_blob_sha1(sha.encode())}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(path, "rb") as f:
            data = f.read()
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{git_blob_sha1(data)}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not self.head:
            self.wfile.write(data)

    def lfs(self, mode, org, repo, name):
        path = os.path.join(self.hub.root, org, repo, name)
        if ".." in name.split("/") or not os.path.isfile(path):
            return self.error(404, "EntryNotFound", f"{name} not found")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        if mode == "badsha":
            data[len(data) // 2] ^= 0x5A
        start, total = 0, len(data)
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-") and rng[6:-1].isdigit():
            start = int(rng[6:-1])
            if start >= total:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{total}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        self.send_response(206 if start else 200)
        self.send_header("ETag", f'"{self.hub.sha256(path)}"')
        self.send_header("Accept-Ranges", "bytes")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
        self.send_header("Content-Length", str(total - start))
        self.end_headers()
        if self.head:
            return
        body = memoryview(data)[start:]
        try:
            if mode == "cut" and path not in self.hub.cut_done:
                self.hub.cut_done.add(path)
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                return  # HTTP/1.0: the connection closes short of Content-Length
            piece, pause, stop = {"slow": (16 << 10, 0.02, 3.0), "steady": (512 << 10, 0.02, 60.0)}.get(
                mode, (len(body) or 1, 0.0, 60.0))
            t0 = time.monotonic()
            for off in range(0, len(body), piece):
                if time.monotonic() - t0 > stop:
                    return
                self.wfile.write(body[off:off + piece])
                if pause:
                    self.wfile.flush()
                    time.sleep(pause)
        except (BrokenPipeError, ConnectionResetError):
            pass


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    root, port_file, log = sys.argv[1:4]
    lifetime = float(sys.argv[4]) if len(sys.argv) == 5 else 60.0
    Handler.hub = Hub(root, log)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(tmp, port_file)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    time.sleep(lifetime)
    srv.shutdown()


if __name__ == "__main__":
    main()
