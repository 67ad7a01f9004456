// The single page: a router from the URL path to one page at a time. Each page renders into
// <main> and returns what stops its timers and feeds when the user leaves it.
import "./style.css";
import { alertText, h, replace } from "./dom";
import { rackPage } from "./pages/rack";
import { livePage } from "./pages/live";
import { profilePage } from "./pages/profile";
import { sessionsPage } from "./pages/sessions";
import { compareRedirect, diffPage } from "./pages/diff";
import { fleetPage } from "./pages/fleet";
import { firmwarePage } from "./pages/firmware";
import { navigate } from "./router";
import { apiToken } from "./api";

export type Cleanup = () => void;
// A page that loads nothing renders at once (returns nothing); the others return a promise.
export type Page = (
  main: HTMLElement,
  params: URLSearchParams,
  id?: number,
) => Promise<Cleanup | void> | void;

const routes: { pattern: RegExp; nav: string; page: Page }[] = [
  { pattern: /^\/$/, nav: "rack", page: rackPage },
  { pattern: /^\/live(?:\/(\d+))?$/, nav: "live", page: livePage },
  { pattern: /^\/sessions$/, nav: "sessions", page: sessionsPage },
  { pattern: /^\/sessions\/(\d+)$/, nav: "sessions", page: profilePage },
  { pattern: /^\/fleet$/, nav: "fleet", page: fleetPage },
  { pattern: /^\/diff$/, nav: "diff", page: diffPage },
  // Compare links (two session ids) open the Diff of those sessions.
  {
    pattern: /^\/compare$/,
    nav: "diff",
    page: async (_main, params) => {
      history.replaceState(null, "", compareRedirect(params));
      await render();
    },
  },
  { pattern: /^\/firmware$/, nav: "firmware", page: firmwarePage },
];

const main = document.getElementById("main") as HTMLElement;
let cleanup: Cleanup | void;

async function render() {
  cleanup?.();
  cleanup = undefined;
  const path = location.pathname.replace(/\/+$/, "") || "/";
  const route = routes.find((r) => r.pattern.test(path));
  for (const a of document.querySelectorAll<HTMLAnchorElement>("[data-nav]")) {
    if (a.dataset.nav === route?.nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!route) {
    replace(main, h("h1", {}, "Not found"), h("p", {}, `No page at ${path}.`));
    return;
  }
  const match = route.pattern.exec(path);
  const id = match?.[1] ? Number(match[1]) : undefined;
  replace(main, h("p", { class: "muted" }, "Loading…"));
  try {
    cleanup = await route.page(main, new URLSearchParams(location.search), id);
  } catch (e) {
    replace(main, h("h1", {}, "Something went wrong"), alertText(String((e as Error).message)));
  }
}

// Same-origin links go through the router, except downloads.
document.addEventListener("click", (e) => {
  const a = (e.target as Element).closest?.("a");
  if (
    !a ||
    a.hasAttribute("download") ||
    a.target ||
    e.ctrlKey ||
    e.metaKey ||
    e.shiftKey ||
    e.button !== 0
  )
    return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/api/")) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});
// The token form in the header: saved in this browser, then the page reloads its data.
const tokenForm = document.getElementById("token-form") as HTMLFormElement;
(tokenForm.elements.namedItem("token") as HTMLInputElement).value = apiToken.get();
tokenForm.addEventListener("submit", (e) => {
  e.preventDefault();
  apiToken.set((tokenForm.elements.namedItem("token") as HTMLInputElement).value.trim());
  void render();
});
window.addEventListener(
  "popstate",
  () => void render().then(() => main.focus({ preventScroll: true })),
);
void render();
