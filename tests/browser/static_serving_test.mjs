// Static serving by a real `rackprof serve` (no browser needed): a site of known files in a
// temporary web_root, fetched over HTTP as a browser would, and a token that guards the API
// but not the page that asks for it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { binary, startDaemon } from "./daemon.mjs";

if (!fs.existsSync(binary)) {
  console.log(`SKIP static serving tests: ${binary} is not built`);
  process.exit(77);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rackprof-static-"));
const site = path.join(dir, "site");
let daemon;

before(async () => {
  fs.mkdirSync(path.join(site, "assets"), { recursive: true });
  fs.writeFileSync(path.join(site, "index.html"), "<!doctype html><title>rackprof test site</title>");
  fs.writeFileSync(path.join(site, "assets/app-4f3e2d1c.js"), "export const x = 1;\n");
  fs.writeFileSync(path.join(site, "assets/app-4f3e2d1c.css"), "body { color: red }\n");
  fs.writeFileSync(path.join(site, "assets/graph.wasm"), Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]));
  fs.writeFileSync(path.join(site, "icon.svg"), "<svg xmlns='http://www.w3.org/2000/svg'/>");
  fs.writeFileSync(path.join(dir, "secret.txt"), "not for the web");
  fs.symlinkSync(path.join(dir, "secret.txt"), path.join(site, "leak.txt"));
  fs.writeFileSync(path.join(dir, "token"), "s3cret\n");
  daemon = await startDaemon(
    dir,
    `[server]\nlisten = "127.0.0.1:0"\nweb_root = "${site}"\ntoken_file = "${dir}/token"\ntoken_for_reads = true\n` +
      `[storage]\npath = "${dir}/rack.db"\n`,
  );
});

after(async () => {
  await daemon?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

// curl, so that the path is sent exactly as written (fetch would normalise "..").
function raw(target) {
  const out = execFileSync("curl", ["-s", "--path-as-is", "-o", "-", "-w", "\n%{http_code}", daemon.base + target]).toString();
  const cut = out.lastIndexOf("\n");
  return { body: out.slice(0, cut), status: Number(out.slice(cut + 1)) };
}

test("the log names the dashboard's folder", () => {
  assert.match(daemon.log(), new RegExp(`dashboard: serving ${site.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
});

test("files with their content types and cache headers", async () => {
  const expect = [
    ["/", "text/html; charset=utf-8", "no-cache"],
    ["/index.html", "text/html; charset=utf-8", "no-cache"],
    ["/assets/app-4f3e2d1c.js", "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"],
    ["/assets/app-4f3e2d1c.css", "text/css; charset=utf-8", "public, max-age=31536000, immutable"],
    ["/assets/graph.wasm", "application/wasm", "public, max-age=31536000, immutable"],
    ["/icon.svg", "image/svg+xml", "no-cache"],
  ];
  for (const [url, type, cache] of expect) {
    const r = await fetch(daemon.base + url);
    assert.equal(r.status, 200, url);
    assert.equal(r.headers.get("content-type"), type, url);
    assert.equal(r.headers.get("cache-control"), cache, url);
    assert.equal(r.headers.get("x-content-type-options"), "nosniff", url);
    assert.match(r.headers.get("content-security-policy"), /default-src 'self'/, url);
  }
  const wasm = Buffer.from(await (await fetch(`${daemon.base}/assets/graph.wasm`)).arrayBuffer());
  assert.deepEqual([...wasm], [0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]);
});

test("client-side routes get index.html; missing files and API paths get JSON 404s", async () => {
  for (const route of ["/sessions", "/sessions/12", "/live/3", "/compare?a=1&b=2"]) {
    const r = await fetch(daemon.base + route);
    assert.equal(r.status, 200, route);
    assert.match(await r.text(), /rackprof test site/, route);
  }
  for (const url of ["/assets/missing-0000.js", "/api/v1/nothing", "/api/v2/boards", "/api"]) {
    const r = await fetch(daemon.base + url, { headers: { Authorization: "Bearer s3cret" } });
    assert.equal(r.status, 404, url);
    assert.equal((await r.json()).error.code, "not_found", url);
  }
  assert.equal((await fetch(`${daemon.base}/`, { method: "POST" })).status, 405);
});

test("nothing outside the web root", () => {
  for (const target of ["/../secret.txt", "/assets/../../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt", "/..%5csecret.txt", "/%00"]) {
    const r = raw(target);
    assert.equal(r.status, 400, target);
    assert.doesNotMatch(r.body, /not for the web/, target);
  }
  const link = raw("/leak.txt");
  assert.equal(link.status, 404);
  assert.doesNotMatch(link.body, /not for the web/);
});

test("the page loads without the token the API asks for", async () => {
  assert.equal((await fetch(`${daemon.base}/sessions`)).status, 200);
  assert.equal((await fetch(`${daemon.base}/api/v1/boards`)).status, 401);
  assert.equal((await fetch(`${daemon.base}/api/v1/boards`, { headers: { Authorization: "Bearer s3cret" } })).status, 200);
});
