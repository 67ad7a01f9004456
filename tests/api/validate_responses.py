#!/usr/bin/env python3
"""Validate a real daemon's answers against the response schemas of web/api/openapi.json.

Usage: validate_responses.py --rackprof PATH/TO/rackprof [--source-dir REPO]
       validate_responses.py --self-test [--source-dir REPO]

Starts `rackprof serve --listen 127.0.0.1:0` on its embedded default (three simulated boards)
in a temporary folder, reads its port from the log line "HTTP API listening on IP:PORT", waits
for a session of sim-blinky with samples, then calls every GET route of the API with real ids
and names (boards, sessions, profiles, a selection, a diff of two sessions, every export
format, the status routes), the write routes on what they can change safely (firmware upload
and attach, an import, stopping and starting a session, a board added and removed) and error
cases (404, 400, 410...). Each answer must have a status the document lists for its route and a
media type listed for that status; a JSON answer must validate against the schema listed for
it. Schemas are taken strictly: an object with declared properties may carry no other member
(an undocumented field is a mismatch), unless the document says additionalProperties.

OpenAPI 3.0's `nullable: true` becomes a JSON-Schema type array (or anyOf with null), every
$ref is inlined and allOf's objects merged, and the result is checked with python3-jsonschema's
Draft 2020-12 validator.

Prints "N responses validated against openapi.json" and exits 0, or lists every mismatch and
exits 1 (2 when the daemon could not be started). The daemon is stopped with SIGTERM whatever
happens. --self-test plants wrong answers (a field of the wrong type, a missing or undocumented
field, a bad enum value, null where none is allowed, an undocumented status or media type) and
passes only when the validator reports each of them.
"""

import argparse
import copy
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

try:
    import jsonschema
except ImportError:  # pragma: no cover
    print("SKIP: python3-jsonschema is missing (apt-get install python3-jsonschema)")
    sys.exit(77)

HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


# ---- the document, as JSON Schema ------------------------------------------------------------


def resolve(doc, node, seen=()):
    """`node` with every $ref inlined, allOf merged and nullable turned into JSON Schema."""
    if isinstance(node, list):
        return [resolve(doc, n, seen) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise ValueError("only local $refs are supported: " + ref)
        if ref in seen:
            raise ValueError("recursive schema at " + ref)
        target = doc
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        return resolve(doc, target, seen + (ref,))
    out = {k: resolve(doc, v, seen) for k, v in node.items()}
    if "allOf" in out and all(is_object_schema(s) for s in out["allOf"]):
        out = merge_all_of(out)
    if out.pop("nullable", False):
        out = with_null(out)
    return out


def is_object_schema(s):
    return isinstance(s, dict) and (s.get("type") == "object" or "properties" in s)


def merge_all_of(schema):
    """allOf of object schemas as one object schema (so strictness sees every property)."""
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    merged["type"] = "object"
    properties = dict(merged.get("properties", {}))
    required = list(merged.get("required", []))
    for part in schema["allOf"]:
        properties.update(part.get("properties", {}))
        required += [r for r in part.get("required", []) if r not in required]
        if "additionalProperties" in part:
            merged["additionalProperties"] = part["additionalProperties"]
    merged["properties"] = properties
    merged["required"] = required
    return merged


def with_null(schema):
    t = schema.get("type")
    if isinstance(t, str):
        out = dict(schema, type=[t, "null"])
        if "enum" in out and None not in out["enum"]:
            out["enum"] = out["enum"] + [None]
        return out
    return {"anyOf": [schema, {"type": "null"}]}


def strict(schema):
    """Objects with declared properties admit no other member unless additionalProperties says."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) if k not in ("enum", "required", "example", "default") else v
           for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


class Document:
    def __init__(self, doc):
        self.doc = doc
        self.operations = {}  # (method, path) -> {status: {media essence: schema or None}}
        for path, item in doc["paths"].items():
            for method, op in item.items():
                if method not in HTTP_METHODS:
                    continue
                responses = {}
                for status, response in op.get("responses", {}).items():
                    media = {}
                    for media_type, body in response.get("content", {}).items():
                        schema = body.get("schema")
                        media[essence(media_type)] = (
                            strict(resolve(doc, schema)) if schema is not None else None)
                    responses[status] = media
                self.operations[(method, path)] = responses

    def check(self, method, path, status, content_type, body):
        """Every way this answer departs from the document; [] when it conforms."""
        op = self.operations.get((method, path))
        where = f"{method.upper()} {path} -> {status}"
        if op is None:
            return [f"{where}: the document has no such operation"]
        media = op.get(str(status))
        if media is None:
            media = op.get(f"{str(status)[0]}XX", op.get("default"))
        if media is None:
            return [f"{where}: status {status} is not documented (documented: "
                    f"{', '.join(sorted(op))})"]
        if not media:
            if body:
                return [f"{where}: documented without a body, answered {len(body)} bytes "
                        f"({content_type or 'no Content-Type'})"]
            return []
        kind = essence(content_type or "")
        if kind not in media:
            return [f"{where}: media type {content_type!r} is not documented "
                    f"(documented: {', '.join(sorted(media))})"]
        schema = media[kind]
        if kind != "application/json" and not kind.endswith("+json"):
            return []
        try:
            value = json.loads(body)
        except ValueError as e:
            return [f"{where}: {kind} body does not parse: {e}"]
        if schema is None:
            return []
        validator = jsonschema.Draft202012Validator(schema)
        problems = []
        for error in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
            at = "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]"
                         for p in error.absolute_path) or "(the body)"
            problems.append(f"{where}: {at}: {short(error.message)}")
        return problems


def essence(content_type):
    return content_type.split(";")[0].strip().lower()


def short(text, limit=300):
    return text if len(text) <= limit else text[:limit] + "..."


# ---- the daemon ------------------------------------------------------------------------------


class Daemon:
    def __init__(self, binary, folder):
        self.folder = folder
        self.log_path = os.path.join(folder, "serve.log")
        self.log_file = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0"], cwd=folder,
            stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = re.search(r"HTTP API listening on [0-9.]+:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("the daemon did not listen; its log:\n" + self.log())

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log_file.close()


class Client:
    def __init__(self, port, document):
        self.base = f"http://127.0.0.1:{port}"
        self.document = document
        self.problems = []
        self.validated = 0
        self.called = set()
        self.statuses = set()  # (method, pattern, status) seen
        self.verbose = False

    def call(self, method, pattern, target, body=None, content_type=None, expect=None):
        """Calls `target` as an instance of route `pattern`, checks the answer; (status, data)."""
        request = urllib.request.Request(self.base + target, data=body, method=method.upper())
        if content_type:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                status, headers, data = reply.status, reply.headers, reply.read()
        except urllib.error.HTTPError as e:
            status, headers, data = e.code, e.headers, e.read()
        self.called.add((method, pattern))
        self.statuses.add((method, pattern, status))
        if self.verbose:
            print(f"  {status} {headers.get('Content-Type') or '-'}  {method.upper()} {target}")
        found = self.document.check(method, pattern, status, headers.get("Content-Type"), data)
        if expect is not None and status not in (expect if isinstance(expect, tuple) else (expect,)):
            found.append(f"{method.upper()} {target}: expected {expect}, answered {status}: "
                         f"{short(data.decode('utf-8', 'replace'))}")
        self.problems += [f"{p}   [{method.upper()} {target}]" for p in found]
        self.validated += 1
        return status, data

    def json(self, method, pattern, target, **kw):
        status, data = self.call(method, pattern, target, **kw)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, None


def eventually(check, seconds, what):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {seconds} s: {what}")
        time.sleep(0.2)


def get_json(base, target):
    try:
        with urllib.request.urlopen(base + target, timeout=30) as reply:
            return json.loads(reply.read())
    except (urllib.error.URLError, ValueError):
        return None


def q(**values):
    return urllib.parse.urlencode(values)


def exercise(c, folder):
    """Every route with real ids, the safe writes, and error cases."""
    base = c.base
    # A sim-blinky session with samples and calls, so its profile names functions.
    def blinky_session():
        sessions = get_json(base, "/api/v1/sessions?" + q(board="sim-blinky")) or []
        for s in sessions:
            counters = s.get("counters", {})
            if counters.get("pc_samples", 0) > 0 and counters.get("arcs", 0) > 0:
                return s
        return None
    first = eventually(blinky_session, 60, "a sim-blinky session with samples and arcs")
    sid = first["id"]
    eventually(lambda: (get_json(base, f"/api/v1/sessions/{sid}/profile?top=1") or {}).get("flat"),
               60, f"session {sid}'s profile to name functions")

    # Status.
    c.json("get", "/healthz", "/healthz", expect=200)
    c.json("get", "/readyz", "/readyz", expect=200)
    c.json("get", "/api/v1/version", "/api/v1/version", expect=200)
    c.json("get", "/api/v1/openapi.json", "/api/v1/openapi.json", expect=200)
    c.call("get", "/metrics", "/metrics", expect=200)

    # Boards.
    _, boards = c.json("get", "/api/v1/boards", "/api/v1/boards", expect=200)
    for b in boards or []:
        c.json("get", "/api/v1/boards/{name}", "/api/v1/boards/" + urllib.parse.quote(b["name"]),
               expect=200)
    c.json("get", "/api/v1/boards/{name}", "/api/v1/boards/no-such-board", expect=404)

    # Sessions, with each filter.
    _, sessions = c.json("get", "/api/v1/sessions", "/api/v1/sessions", expect=200)
    for query in (q(board="sim-blinky"), q(state="capturing"), q(tag="none"),
                  q(**{"from": 0, "to": 2**62})):
        c.json("get", "/api/v1/sessions", "/api/v1/sessions?" + query, expect=200)
    c.json("get", "/api/v1/sessions", "/api/v1/sessions?from=yesterday", expect=400)
    c.json("get", "/api/v1/sessions", "/api/v1/sessions?board=%zz", expect=400)
    for s in sessions or []:
        c.json("get", "/api/v1/sessions/{id}", f"/api/v1/sessions/{s['id']}", expect=200)
    c.json("get", "/api/v1/sessions/{id}", "/api/v1/sessions/999999", expect=404)
    c.json("get", "/api/v1/sessions/{id}", "/api/v1/sessions/abc", expect=400)
    c.call("get", "/api/v1/sessions/{id}/console", f"/api/v1/sessions/{sid}/console", expect=200)
    c.call("get", "/api/v1/sessions/{id}/console", f"/api/v1/sessions/{sid}/console?tail=3",
           expect=200)
    c.json("get", "/api/v1/sessions/{id}/console", "/api/v1/sessions/999999/console", expect=404)
    for view in ("tasks", "interrupts", "timeline"):
        c.json("get", f"/api/v1/sessions/{{id}}/{view}", f"/api/v1/sessions/{sid}/{view}",
               expect=200)
        c.json("get", f"/api/v1/sessions/{{id}}/{view}", f"/api/v1/sessions/999999/{view}",
               expect=404)
    c.json("get", "/api/v1/sessions/{id}/timeline",
           f"/api/v1/sessions/{sid}/timeline?from=0&to=1000000", expect=200)
    c.json("get", "/api/v1/sessions/{id}/timeline", f"/api/v1/sessions/{sid}/timeline?from=x",
           expect=400)

    # A second session on the same board: the first stopped (completed), a new one started.
    c.json("post", "/api/v1/sessions/{id}/stop", f"/api/v1/sessions/{sid}/stop", expect=200)
    c.json("post", "/api/v1/sessions/{id}/stop", f"/api/v1/sessions/{sid}/stop", expect=409)
    _, second = c.json("post", "/api/v1/boards/{name}/sessions",
                       "/api/v1/boards/sim-blinky/sessions", expect=201)
    c.json("post", "/api/v1/boards/{name}/sessions", "/api/v1/boards/no-such-board/sessions",
           expect=404)
    sid2 = (second or {}).get("id")
    if sid2:
        eventually(lambda: (get_json(base, f"/api/v1/sessions/{sid2}") or {})
                   .get("counters", {}).get("pc_samples", 0) > 0,
                   60, f"session {sid2} to have samples")

    # Profiles: whole, trimmed, a window, one function's call graph, the sync check.
    profile = f"/api/v1/sessions/{sid}/profile"
    pattern = "/api/v1/sessions/{id}/profile"
    _, whole = c.json("get", pattern, profile, expect=200)
    c.json("get", pattern, profile + "?" + q(top=5, min_percent=0.5, graph_top=3), expect=200)
    c.json("get", pattern, profile + "?" + q(**{"from": 0, "to": 2**62}), expect=200)
    names = [f["name"] for f in (whole or {}).get("flat", [])]
    if names:
        c.json("get", pattern, profile + "?" + q(top=1, graph_function=names[0]), expect=200)
    if sid2:
        c.json("get", pattern, profile + "?" + q(sync_reference=sid2), expect=(200, 422))
    c.json("get", pattern, profile + "?top=many", expect=400)
    c.json("get", pattern, "/api/v1/sessions/999999/profile", expect=404)

    # Per line and per instruction: a function, the busiest, an unknown one.
    for view in ("lines", "disasm"):
        pattern = "/api/v1/sessions/{id}/" + view
        path = f"/api/v1/sessions/{sid}/{view}"
        if names:
            c.json("get", pattern, path + "?" + q(function=names[0]), expect=200)
        c.json("get", pattern, path, expect=200)
        c.json("get", pattern, path + "?" + q(function="no_such_function"), expect=404)
        c.json("get", "/api/v1/profile/" + view,
               f"/api/v1/profile/{view}?" + q(session=sid, **({"function": names[0]} if names else {})),
               expect=200)

    # Every export format, and the older paths.
    doc = c.document.doc
    formats = next(p["schema"]["enum"] for p in
                   doc["paths"]["/api/v1/sessions/{id}/export/{format}"]["get"]["parameters"]
                   if p["name"] == "format")
    for f in formats:
        # cct-*: 422 without a calling-context tree (the simulated boards send no entry/exit events)
        c.call("get", "/api/v1/sessions/{id}/export/{format}",
               f"/api/v1/sessions/{sid}/export/{f}", expect=(200, 422) if f.startswith("cct-") else 200)
    c.call("get", "/api/v1/sessions/{id}/export/{format}",
           f"/api/v1/sessions/{sid}/export/text?intervals=1", expect=200)
    c.call("get", "/api/v1/sessions/{id}/export/{format}",
           f"/api/v1/sessions/{sid}/export/no-such-format", expect=404)
    for alias in ("gmon.out", "records.csv", "records.ndjson", "raw"):
        c.call("get", "/api/v1/sessions/{id}/" + alias, f"/api/v1/sessions/{sid}/{alias}",
               expect=200)
        c.call("get", "/api/v1/sessions/{id}/" + alias, f"/api/v1/sessions/0/{alias}", expect=400)

    # Selections: one session, a board's sessions (spread over two), by build; exports; errors.
    selections = [q(session=sid), q(board="sim-blinky")]
    build_id = first.get("build_id")
    if build_id:
        selections.append(q(build_id=build_id))
    if sid2:
        selections.append(q(session=f"{sid},{sid2}"))
    for selection in selections:
        c.json("get", "/api/v1/profile", "/api/v1/profile?" + selection, expect=200)
    c.json("get", "/api/v1/profile", "/api/v1/profile?" + q(board="sim-blinky", graph_top=0,
                                                               spread_top=2), expect=200)
    c.json("get", "/api/v1/profile", "/api/v1/profile?" + q(session=f"{sid}", merge="by_name"),
           expect=200)
    c.json("get", "/api/v1/profile", "/api/v1/profile?session=abc", expect=400)
    c.json("get", "/api/v1/profile", "/api/v1/profile?" + q(session=sid, colour="red"), expect=400)
    c.json("get", "/api/v1/profile", "/api/v1/profile?" + q(bench="lab"), expect=400)
    c.json("get", "/api/v1/profile", "/api/v1/profile?session=999999", expect=404)
    whole_formats = next(p["schema"]["enum"] for p in
                         doc["paths"]["/api/v1/profile/export/{format}"]["get"]["parameters"]
                         if p["name"] == "format")
    for f in whole_formats:
        c.call("get", "/api/v1/profile/export/{format}",
               f"/api/v1/profile/export/{f}?" + q(session=sid),
               expect=(200, 422) if f.startswith("cct-") else 200)
    c.call("get", "/api/v1/profile/export/{format}",
           "/api/v1/profile/export/raw?" + q(session=sid), expect=404)

    # Diffs: two sessions of one board; with a gate; as text; errors.
    other = sid2 or sid
    a, b = q(session=sid), q(session=other)
    c.json("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a, b=b), expect=200)
    c.json("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a, b=b, lines=1), expect=200)
    c.json("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a, b=b, lines=2), expect=400)
    c.json("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a, b=b, alpha=0.05,
                                                       fail_on="self>+1000%,calls>+0%"),
           expect=(200, 422))
    c.json("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a, b=b, fail_on="calls>-99%"),
           expect=(200, 422))
    c.call("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a, b=b, format="text"), expect=200)
    c.json("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a), expect=400)
    c.json("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a, b=b, fail_on="fast"), expect=400)
    c.json("get", "/api/v1/diff", "/api/v1/diff?" + q(a=a, b="session=999999"), expect=404)

    # Firmware: uploaded (stored, then already there), attached to a session.
    elf = Path(folder) / "var" / "firmware" / "blinky.elf"
    if elf.exists():
        image = elf.read_bytes()
        status, stored = c.json("put", "/api/v1/firmware", "/api/v1/firmware", body=image,
                                content_type="application/octet-stream", expect=(200, 201))
        c.json("put", "/api/v1/firmware", "/api/v1/firmware", body=image,
               content_type="application/octet-stream", expect=200)
        status, listed = c.json("get", "/api/v1/firmware", "/api/v1/firmware", expect=200)
        if stored and "id" in stored and stored["id"] not in [f.get("id") for f in listed or []]:
            c.problems.append("GET /api/v1/firmware does not list the image just stored")
        if stored and "id" in stored:
            c.json("put", "/api/v1/sessions/{id}/firmware", f"/api/v1/sessions/{sid}/firmware",
                   body=json.dumps({"id": stored["id"]}).encode(),
                   content_type="application/json", expect=200)
    else:
        c.problems.append(f"no demo firmware at {elf}: the firmware routes were not called")
    c.json("put", "/api/v1/firmware", "/api/v1/firmware", body=b"not an ELF",
           content_type="application/octet-stream", expect=422)
    c.json("put", "/api/v1/sessions/{id}/firmware", f"/api/v1/sessions/{sid}/firmware",
           body=b'{"id": "../x"}', content_type="application/json", expect=422)
    c.json("put", "/api/v1/sessions/{id}/firmware", f"/api/v1/sessions/{sid}/firmware",
           body=b'{"id": "0123"}', content_type="text/plain", expect=415)

    # An import: the session's own gmon.out stored as a new completed session.
    status, gmon = c.call("get", "/api/v1/sessions/{id}/gmon.out",
                          f"/api/v1/sessions/{sid}/gmon.out", expect=200)
    if status == 200:
        _, imported = c.json("post", "/api/v1/sessions/import",
                             "/api/v1/sessions/import?" + q(format="gmon", board="imported"),
                             body=gmon, content_type="application/octet-stream", expect=201)
        c.json("post", "/api/v1/sessions/import", "/api/v1/sessions/import?" + q(format="gmon"),
               body=b"not a gmon.out", content_type="application/octet-stream", expect=422)
        if imported and "id" in imported:
            c.json("get", "/api/v1/sessions/{id}", f"/api/v1/sessions/{imported['id']}",
                   expect=200)
            # An imported gmon.out has no raw bytes or records.
            c.call("get", "/api/v1/sessions/{id}/export/{format}",
                   f"/api/v1/sessions/{imported['id']}/export/ndjson", expect=(200, 422))
            c.call("delete", "/api/v1/sessions/{id}", f"/api/v1/sessions/{imported['id']}",
                   expect=204)
    c.json("delete", "/api/v1/sessions/{id}", f"/api/v1/sessions/{sid2 or sid}", expect=409)
    c.json("delete", "/api/v1/sessions/{id}", "/api/v1/sessions/999999", expect=404)

    # Boards through the API: a bad body, one added and changed and removed where links allow.
    c.json("post", "/api/v1/boards", "/api/v1/boards", body=b"{", content_type="application/json",
           expect=400)
    c.json("post", "/api/v1/boards", "/api/v1/boards", body=b"{}", content_type="text/plain",
           expect=415)
    c.json("post", "/api/v1/boards", "/api/v1/boards", body=b'{"name": "sim-blinky"}',
           content_type="application/json", expect=(409, 422))
    board = {"name": "api-board", "link": "sim://blinky"}
    status, _ = c.json("post", "/api/v1/boards", "/api/v1/boards",
                       body=json.dumps(board).encode(), content_type="application/json")
    if status == 201:
        c.json("put", "/api/v1/boards/{name}", "/api/v1/boards/api-board",
               body=json.dumps(dict(board, tags=["api"])).encode(),
               content_type="application/json", expect=200)
        c.call("delete", "/api/v1/boards/{name}", "/api/v1/boards/api-board", expect=(204, 409))
    c.json("put", "/api/v1/boards/{name}", "/api/v1/boards/sim-blinky",
           body=json.dumps({"link": "sim://blinky"}).encode(), content_type="application/json",
           expect=(403, 409, 422))
    c.json("delete", "/api/v1/boards/{name}", "/api/v1/boards/sim-blinky", expect=409)
    c.json("delete", "/api/v1/boards/{name}", "/api/v1/boards/no-such-board", expect=404)


def run(binary, document, verbose=False):
    with tempfile.TemporaryDirectory(prefix="rackprof-openapi-") as folder:
        try:
            daemon = Daemon(binary, folder)
        except (OSError, RuntimeError) as e:
            print(f"cannot start the daemon: {e}")
            return 2
        c = Client(daemon.port, document)
        c.verbose = verbose
        try:
            exercise(c, folder)
        except Exception as e:  # a timeout or a refused connection: report what was found
            c.problems.append(f"the run stopped early: {type(e).__name__}: {e}")
        finally:
            daemon.stop()
        uncalled = sorted(f"{m.upper()} {p}" for (m, p) in document.operations
                          if (m, p) not in c.called)
        if any(u.startswith("GET ") for u in uncalled):
            c.problems += [f"never called: {u}" for u in uncalled if u.startswith("GET ")]
        if c.problems:
            print(f"{len(c.problems)} mismatches with openapi.json in {c.validated} responses:")
            for p in c.problems:
                print("  " + p)
            log = daemon.log()
            print("the daemon's log (last lines):\n" + "\n".join(log.splitlines()[-20:]))
            return 1
        print(f"{c.validated} responses validated against openapi.json "
              f"({len(c.called)} of {len(document.operations)} operations called, "
              f"{len(c.statuses)} (operation, status) pairs"
              + (f"; not called: {', '.join(uncalled)}" if uncalled else "") + ")")
        return 0


# ---- self-test -------------------------------------------------------------------------------


def self_test(document):
    """The validator must pass good answers and report each planted fault."""
    board = {"name": "sim-blinky", "link": "sim://blinky", "state": "connected", "last_error": "",
             "reconnects": 0, "session": 1,
             "counters": {k: 0 for k in document.doc["components"]["schemas"]["Counters"]["required"]},
             "storage_state": "ok", "storage_error": None}
    error = {"error": {"code": "not_found", "message": "no board named 'x'"}}
    good = [("get", "/api/v1/boards", 200, "application/json", [board]),
            ("get", "/api/v1/boards/{name}", 200, "application/json", board),
            ("get", "/api/v1/boards/{name}", 404, "application/json", error),
            ("get", "/healthz", 200, "application/json", {"status": "ok"}),
            ("get", "/metrics", 200, "text/plain; version=0.0.4; charset=utf-8", "# metrics\n")]
    failures = []
    for method, path, status, media, body in good:
        found = document.check(method, path, status, media, encode(body))
        if found:
            failures.append(f"a good answer was refused: {found}")

    def planted(change):
        b = copy.deepcopy(board)
        change(b)
        return b
    bad = {
        "a field of the wrong type (reconnects as a string)":
            ("get", "/api/v1/boards/{name}", 200, "application/json",
             planted(lambda b: b.update(reconnects="7"))),
        "a number where an integer is due":
            ("get", "/api/v1/boards/{name}", 200, "application/json",
             planted(lambda b: b.update(reconnects=1.5))),
        "a missing required field":
            ("get", "/api/v1/boards/{name}", 200, "application/json",
             planted(lambda b: b.pop("storage_state"))),
        "an undocumented field":
            ("get", "/api/v1/boards/{name}", 200, "application/json",
             planted(lambda b: b.update(colour="red"))),
        "a value outside its enum":
            ("get", "/api/v1/boards/{name}", 200, "application/json",
             planted(lambda b: b.update(state="asleep"))),
        "null where it is not nullable":
            ("get", "/api/v1/boards/{name}", 200, "application/json",
             planted(lambda b: b.update(name=None))),
        "a wrong counter inside a nested $ref":
            ("get", "/api/v1/boards", 200, "application/json",
             [planted(lambda b: b["counters"].update(arcs="many"))]),
        "an error without its message":
            ("get", "/api/v1/boards/{name}", 404, "application/json",
             {"error": {"code": "not_found"}}),
        "an undocumented status":
            ("get", "/api/v1/boards/{name}", 418, "application/json", error),
        "an undocumented media type":
            ("get", "/api/v1/boards/{name}", 200, "text/html", "<p>board</p>"),
        "JSON where text is documented":
            ("get", "/metrics", 200, "application/json", {"metrics": 1}),
    }
    for what, (method, path, status, media, body) in bad.items():
        found = document.check(method, path, status, media, encode(body))
        if not found:
            failures.append(f"not reported: {what}")
        else:
            print(f"  reported, as it should be: {what}: {found[0]}")
    if failures:
        print("self-test FAILED:")
        for f in failures:
            print("  " + f)
        return 1
    print(f"self-test passed: {len(good)} good answers pass, {len(bad)} planted faults are reported")
    return 0


def encode(body):
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rackprof", help="the rackprof binary to serve")
    parser.add_argument("--source-dir", default=str(Path(__file__).resolve().parents[2]),
                        help="the repository (for web/api/openapi.json)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each call")
    parser.add_argument("--self-test", action="store_true",
                        help="check that the validator reports planted wrong answers")
    args = parser.parse_args()
    with open(Path(args.source_dir) / "web" / "api" / "openapi.json", encoding="utf-8") as f:
        document = Document(json.load(f))
    if args.self_test:
        return self_test(document)
    if not args.rackprof:
        parser.error("--rackprof is required (or --self-test)")
    return run(args.rackprof, document, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
