// A real `rackprof serve` for the tests here: started on a configuration in a temporary
// folder, its port read from the log line "HTTP API listening on IP:PORT", stopped by SIGTERM.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const source = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const binary = process.env.RACKPROF_BINARY ?? path.join(source, "build/rackprof");

// `rackprof ARGS...` run in `dir`, its standard output returned (it throws when the command fails).
export const rackprofIn = (dir) => (...args) => execFileSync(binary, args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] }).toString();

export async function eventually(check, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// `ready(log)` says when the daemon is far enough (e.g. its boards capture).
export async function startDaemon(dir, toml, ready = () => true) {
  fs.writeFileSync(path.join(dir, "rack.toml"), toml);
  const logPath = path.join(dir, "serve.log");
  const log = fs.openSync(logPath, "w");
  const child = spawn(binary, ["serve", "--config", path.join(dir, "rack.toml")], { cwd: dir, stdio: ["ignore", log, log] });
  const exited = new Promise((r) => child.once("exit", r));
  const port = await eventually(() => {
    const text = fs.readFileSync(logPath, "utf8");
    const m = /HTTP API listening on [0-9.]+:(\d+)/.exec(text);
    return m && ready(text) ? m[1] : null;
  }, 15000, "the daemon to listen");
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    log: () => fs.readFileSync(logPath, "utf8"),
    // The API's JSON answer to `method url` (a body goes as octet-stream); asserts a 2xx status.
    api: async (method, url, body) => {
      const r = await fetch(base + url, { method, body, headers: body ? { "Content-Type": "application/octet-stream" } : {} });
      const json = await r.json();
      assert.ok(r.ok, `${method} ${url}: ${r.status} ${JSON.stringify(json)}`);
      return json;
    },
    stop: async () => {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

// Headless Chromium with a fresh profile folder under `dir` (--user-data-dir, which playwright
// passes itself) and no background networking (this machine's network is closed), as every
// browser test here drives it. `playwright` is playwright-core's chromium, imported once the
// test knows it exists.
export function launchBrowser(playwright, executablePath, dir, options = {}) {
  return playwright.launchPersistentContext(fs.mkdtempSync(path.join(dir, "chromium-")), {
    executablePath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 800 },
    ...options,
  });
}
