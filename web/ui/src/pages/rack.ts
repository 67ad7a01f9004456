// Rack: every board with its link state, records/s, current session, counters and last error.
// The events feed refreshes at once on a change; a 1 s poll keeps the rates moving.
import { api, feed, type Board, type BoardEvent } from "../api";
import { count, label, time } from "../format";
import { h, link, replace } from "../dom";

const records = (b: Board) => (b.counters ? (b.counters.arcs ?? 0) + (b.counters.pc_samples ?? 0) : 0);

export async function rackPage(main: HTMLElement) {
  const table = h("tbody");
  const events = h("ol", { class: "events", "aria-live": "polite" }, h("li", { class: "muted" }, "No link or session change since this page opened."));
  const feedState = h("span", { class: "pill" }, "connecting");
  const status = h("p", { class: "error", role: "alert" });
  replace(
    main,
    h("h1", {}, "Rack"),
    h(
      "table",
      { class: "data", id: "boards" },
      h("caption", {}, "Boards"),
      h(
        "thead",
        {},
        h("tr", {}, ...["Board", "Link", "State", "Records/s", "Session", "Counters", "Last error", ""].map((t) => h("th", { scope: "col" }, t))),
      ),
      table,
    ),
    status,
    h("h2", {}, "Events ", feedState),
    events,
  );

  let last = new Map<string, { at: number; records: number; session: number | null }>();
  const refresh = async () => {
    let boards: Board[];
    try {
      boards = await api.boards();
      status.textContent = "";
    } catch (e) {
      status.textContent = `Cannot read the boards: ${(e as Error).message}`;
      return;
    }
    const now = performance.now();
    const next = new Map<string, { at: number; records: number; session: number | null }>();
    replace(
      table,
      boards.map((b) => {
        const before = last.get(b.name);
        const n = records(b);
        next.set(b.name, { at: now, records: n, session: b.session });
        const rate =
          before && before.session === b.session && now > before.at ? ((n - before.records) * 1000) / (now - before.at) : null;
        return h(
          "tr",
          { "data-board": b.name },
          h("th", { scope: "row" }, b.name),
          h("td", { class: "mono" }, b.link),
          h(
            "td",
            {},
            h("span", { class: `state state-${b.state}` }, b.state),
            b.reconnects ? ` (${b.reconnects} reconnects)` : "",
            storageBadge(b.storage_state, b.storage_error),
          ),
          h("td", { class: "num", "data-col": "rate" }, rate === null ? "—" : count(rate)),
          h("td", {}, b.session ? link(`/live/${b.session}`, `#${b.session}`) : "—"),
          h("td", {}, counterList(b.counters)),
          h("td", { class: b.last_error || b.storage_error ? "error" : "muted" }, b.storage_error ?? (b.last_error || "none")),
          h(
            "td",
            {},
            b.session
              ? link(`/sessions/${b.session}`, "Profile")
              : h("button", { type: "button", class: "start", onclick: () => void start(b.name) }, "Start session"),
          ),
        );
      }),
    );
    last = next;
  };
  const start = async (board: string) => {
    try {
      await api.startSession(board);
    } catch (e) {
      status.textContent = `Cannot start a session on ${board}: ${(e as Error).message}`;
    }
    await refresh();
  };
  await refresh();
  const poll = window.setInterval(() => void refresh(), 1000);
  const stop = feed<BoardEvent>(
    "/api/v1/events",
    (e) => {
      events.querySelector("li.muted")?.remove();
      events.prepend(
        h(
          "li",
          {},
          h("time", {}, time(e.at_ns)),
          " ",
          h("strong", {}, e.board),
          ` ${e.kind}: ${e.state}`,
          e.session ? ` (session ${e.session})` : "",
          e.reason ? ` — ${e.reason}` : "",
        ),
      );
      while (events.children.length > 20) events.lastElementChild?.remove();
      void refresh();
    },
    (open) => {
      feedState.textContent = open ? "live" : "reconnecting";
      feedState.className = open ? "pill ok" : "pill warn";
    },
  );
  return () => {
    window.clearInterval(poll);
    stop();
  };
}

// While the database's commits fail: a visible mark, the database's message on hover.
export function storageBadge(state: string | undefined, error: string | null | undefined) {
  if (state !== "storage_error") return "";
  return h("span", { class: "state state-storage_error", title: error ?? "", "data-storage": "storage_error" }, " · storage error: data is being lost");
}

// Whatever counters the daemon reports, losses highlighted when not zero.
export function counterList(counters: Record<string, number> | null | undefined) {
  if (!counters) return h("span", { class: "muted" }, "no session");
  const lossy = /discard|lost|resync|gap|drop/;
  return h(
    "dl",
    { class: "counters" },
    Object.entries(counters).map(([k, v]) => [
      h("dt", {}, label(k)),
      h("dd", { class: lossy.test(k) && v > 0 ? "warn" : "" }, count(v)),
    ]),
  );
}
