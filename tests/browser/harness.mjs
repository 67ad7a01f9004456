// What the browser tests here share besides the daemon (daemon.mjs): where the built dashboard,
// the screenshots and Chromium are, the checks that skip a test (exit 77) when one is missing,
// the daemon's configuration, and a page that collects its console errors.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { binary, source } from "./daemon.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
export const webRoot = process.env.RACKPROF_WEB_ROOT ?? path.join(source, "web/dist");
export const artifacts = process.env.RACKPROF_ARTIFACTS ?? path.join(source, "build/test-artifacts");
export const chromium = process.env.RACKPROF_CHROMIUM ?? "/usr/bin/chromium";

// `skip(why)` prints "SKIP <what>: <why>" and exits 77 (ctest: skipped).
export function skipper(what) {
  return (why) => {
    console.log(`SKIP ${what}: ${why}`);
    process.exit(77);
  };
}

// Skips unless Chromium, node_modules, the built dashboard and the binary are there.
export function requireBrowser(skip) {
  if (!fs.existsSync(chromium)) skip(`${chromium} is missing (apt-get install chromium; ./setup.sh)`);
  if (!fs.existsSync(path.join(here, "node_modules/playwright-core"))) skip("tests/browser/node_modules is missing (./setup.sh installs it)");
  if (!fs.existsSync(path.join(webRoot, "index.html"))) skip(`${webRoot} holds no built dashboard (./setup.sh builds web/ui)`);
  if (!fs.existsSync(binary)) skip(`${binary} is not built`);
}

// The daemon's configuration: listening on a free port, serving the built dashboard, its
// database at `database`; boards and the like are appended.
export const serverConfig = (database) => `[server]\nlisten = "127.0.0.1:0"\nweb_root = "${webRoot}"\n[storage]\npath = "${database}"\n`;

// A page of `browser` at `base + url` whose console errors and uncaught exceptions are collected.
export async function openPage(browser, base, url) {
  const page = await browser.newPage();
  const errors = [];
  // With the URL: "Failed to load resource: 404" alone does not say which.
  page.on("console", (m) => m.type() === "error" && errors.push(`${m.text()} ${m.location()?.url ?? ""}`.trim()));
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(base + url);
  return { page, errors, close: () => page.close() };
}

// The whole page at a wide and a narrow desktop width, into
// `artifacts`/dashboard-<name>-<width>.png (CI keeps build/test-artifacts), so a reviewer sees
// every page without running it; the viewport is restored after.
export const kScreenshotWidths = [1400, 1024];
export async function screenshot(page, name) {
  const before = page.viewportSize();
  for (const width of kScreenshotWidths) {
    await page.setViewportSize({ width, height: before?.height ?? 800 });
    const file = path.join(artifacts, `dashboard-${name}-${width}.png`);
    await page.screenshot({ path: file, fullPage: true });
    if (!(fs.statSync(file).size > 1000)) throw new Error(`screenshot ${file} is empty`);
  }
  if (before) await page.setViewportSize(before);
}

// The hrefs of the page's download links (p.downloads a.download).
export const downloadHrefs = (page) => page.$$eval("p.downloads a.download", (as) => as.map((a) => a.getAttribute("href")));

// Closes the browser, stops the daemon and removes the test's temporary folder.
export async function tearDown(browser, daemon, dir) {
  await browser?.close();
  await daemon?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
