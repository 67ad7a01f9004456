// The daemon's HTTP API (web/README.md lists it): typed fetches and WebSocket feeds.

import type { components } from "./api-schema";

// The API's answers are typed from its OpenAPI document (web/api/openapi.json): `npm run gen:api`
// writes api-schema.d.ts from it before every build and check (it is not committed).
type Schemas = components["schemas"];

export type Counters = Schemas["Counters"];
export type Board = Schemas["Board"];
// "storage_error" while the database's commits fail (disk full, I/O error): what arrives is
// counted lost (records_lost_storage) and a gap marks the span.
export type StorageState = Schemas["StorageState"];
// A stored session; raw_pruned is set once [storage] keep_raw_days removed the raw bytes and
// records: the raw and ndjson exports and time windows answer 410 from then on.
export type Session = Schemas["Session"];

// The exports made from the raw bytes and records, gone once a session's raw data is pruned.
export const rawExports = ["raw", "ndjson"];
// The exports of tasks, interrupts and time: one capture's raw bytes decoded again, so none for
// an imported gmon.out or Tiva report, a pruned session, or a selection (the API's 410).
export const taskExports = ["tasks", "tasks-json", "trace"];

export type FlatRow = Schemas["FlatRow"];
export type GraphLine = Schemas["GraphLine"];
export type GraphEntry = Schemas["GraphEntry"];
export type FirmwareImage = Schemas["FirmwareImage"];
// Samples and calls per source line and instruction of a function (/lines, /disasm).
export type Annotation = Schemas["Annotation"];
export type AnnotatedFunction = Schemas["AnnotatedFunction"];

// The calling-context tree (export cct-json): measured in cycles from function entry/exit
// events, or sampled stacks a probe link unwound, counted in samples. The file names its
// numbers by unit ("measured_cycles", "measured_samples", ...); contextOf reads either into one
// shape. An export file, not one of the API's JSON views, so typed here.
export type ContextUnit = "cycles" | "samples";
export interface AttributedArc {
  caller: string;
  callee: string;
  calls: number;
  callee_calls: number;
  callee_total: number;
  measured: number;
  estimated: number;
  difference: number;
  measured_share: number;
  estimated_share: number;
  incomplete: boolean;
}
export interface CallingContext {
  unit: ContextUnit;
  arcs: AttributedArc[];
  incomplete_nodes: number;
  nodes: number;
  total: number;
}
type RawContext = {
  calling_context: Record<string, unknown> & { arcs: Record<string, unknown>[] };
};

export function contextOf(raw: RawContext): CallingContext {
  const c = raw.calling_context;
  const unit: ContextUnit = c.unit === "samples" ? "samples" : "cycles";
  const n = (o: Record<string, unknown>, key: string) => Number(o[key] ?? 0);
  return {
    unit,
    arcs: c.arcs.map((a) => ({
      caller: String(a.caller),
      callee: String(a.callee),
      calls: n(a, "calls"),
      callee_calls: n(a, "callee_calls"),
      callee_total: n(a, `callee_total_${unit}`),
      measured: n(a, `measured_${unit}`),
      estimated: n(a, `estimated_${unit}`),
      difference: n(a, `difference_${unit}`),
      measured_share: n(a, "measured_share"),
      estimated_share: n(a, "estimated_share"),
      incomplete: Boolean(a.incomplete),
    })),
    incomplete_nodes: n(c, "incomplete_nodes"),
    nodes: n(c, "nodes"),
    total: n(c, `total_${unit}`),
  };
}

// GET .../profile?sync_reference=ID: the synchronisation alarm (gmon/sync_check.h) against
// another session of the program sampled with the other sampling-period setting.
export type SyncCheck = Schemas["SyncCheck"];
// What a session's profile and a selection's share.
export type ProfileReport = Schemas["ProfileReport"];
export type Profile = Schemas["SessionProfile"];

// A selection's merged profile (GET /api/v1/profile?<selection>): a profile plus what was merged
// and, per board, its share of each function against the fleet's.
export type SelectionSummary = Schemas["SelectionSummary"];
export type SpreadBoard = Schemas["SpreadBoard"];
export type SpreadFunction = Schemas["SpreadFunction"];
export type Spread = Schemas["Spread"];
export type SelectionProfile = Schemas["SelectionProfile"];

// GET /api/v1/diff?a=<selection>&b=<selection> (schema rackprof.diff/1).
export type DiffSide = Schemas["DiffSide"];
export type DiffFunction = Schemas["DiffFunction"];
export type Diff = Schemas["Diff"];

export type FirmwareStored = Schemas["FirmwareStored"];

// An RTOS's tasks, the interrupts' invocations and the timeline of a session (docs/tasks.md),
// each decoded again from its raw bytes on request (410 once retention pruned them).
export type Tasks = Schemas["Tasks"];
export type TaskRow = Tasks["tasks"][number];
export type Interrupts = Schemas["Interrupts"];
export type ExceptionRow = Interrupts["exceptions"][number];
// The timeline (the Trace Event format): the schema's free-form objects (an event's args, the
// document's otherData) typed as they are read.
type RawTraceEvents = Schemas["TraceEvents"];
export type TraceEvent = Omit<RawTraceEvents["traceEvents"][number], "args"> & {
  args?: Record<string, unknown>;
};
export type TraceEvents = Omit<RawTraceEvents, "traceEvents" | "otherData"> & {
  traceEvents: TraceEvent[];
  otherData?: Record<string, unknown>;
};
// The timeline's window: target time (ns from the session's first stamp; cycles when the
// target's clock is unknown), either bound open.
export interface TargetWindow {
  from?: number;
  to?: number;
}

// The live feeds (WebSockets, not in the OpenAPI document).
export interface LiveSnapshot {
  session: number;
  state: string;
  board?: string;
  link?: string;
  records_per_s?: number;
  bytes_per_s?: number;
  totals?: Record<string, number>; // the counters the feed shows as totals
  losses?: Record<string, number>; // and as losses (storage/counters.h LiveSection)
  storage_state?: StorageState;
  storage_error?: string | null;
  top_functions?: { name: string; self_percent: number; calls: number | null }[];
}

export interface BoardEvent {
  board: string;
  kind: string;
  state: string;
  reason: string;
  session: number | null;
  at_ns: number;
}

// Off loopback the daemon wants "Authorization: Bearer <token>" for changes (and for reads
// with server.token_for_reads); the user enters it once and this browser keeps it.
export const apiToken = {
  get: () => localStorage.getItem("rackprof.token") ?? "",
  set: (token: string) =>
    token
      ? localStorage.setItem("rackprof.token", token)
      : localStorage.removeItem("rackprof.token"),
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function send(method: string, path: string, body?: BodyInit, type?: string): Promise<Response> {
  const headers: Record<string, string> = {};
  if (type) headers["Content-Type"] = type;
  const token = apiToken.get();
  if (token) headers.Authorization = `Bearer ${token}`;
  return fetch(path, { method, body, headers });
}

async function request<T>(
  method: string,
  path: string,
  body?: BodyInit,
  type?: string,
): Promise<T> {
  const reply = await send(method, path, body, type);
  if (reply.status === 204) return undefined as T;
  const text = await reply.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ApiError(reply.status, "bad_reply", `${method} ${path}: ${reply.status} (not JSON)`);
  }
  if (!reply.ok) {
    const e = (json as { error?: { code: string; message: string } }).error;
    const hint = reply.status === 401 ? " (set the API token at the top right)" : "";
    throw new ApiError(reply.status, e?.code ?? "error", (e?.message ?? `${reply.status}`) + hint);
  }
  return json as T;
}

// A text export (the folded stacks): the body as text, or the API's JSON error.
async function requestText(path: string): Promise<string> {
  const reply = await send("GET", path);
  const text = await reply.text();
  if (reply.ok) return text;
  let e: { code?: string; message?: string } | undefined;
  try {
    e = (JSON.parse(text) as { error?: { code: string; message: string } }).error;
  } catch {
    // not JSON: the status says enough
  }
  throw new ApiError(
    reply.status,
    e?.code ?? "error",
    e?.message ?? `GET ${path}: ${reply.status}`,
  );
}

// A time window of a session: receive times (Unix ns) bounding the record batches a profile
// sums; either bound may be left open.
export interface Window {
  from?: number;
  to?: number;
}
export const windowQuery = (w: Window): Record<string, string> => ({
  ...(w.from === undefined ? {} : { from: BigInt(Math.floor(w.from)).toString() }),
  ...(w.to === undefined ? {} : { to: BigInt(Math.ceil(w.to)).toString() }),
});

// How many call-graph entries the profile page asks for unless its URL says (?graph_top=N): the
// drawing's 40 functions and a few cycles, and the table's first page.
export const kGraphEntries = 50;

export const api = {
  boards: () => request<Board[]>("GET", "/api/v1/boards"),
  sessions: (filter: Record<string, string> = {}) =>
    request<Session[]>("GET", "/api/v1/sessions?" + new URLSearchParams(filter).toString()),
  session: (id: number) => request<Session>("GET", `/api/v1/sessions/${id}`),
  // Every flat row, but only the call graph's kGraphEntries busiest entries: the whole graph of
  // a firmware with 10^6 arcs is ~175 MB of JSON. Other entries come one at a time (below).
  profile: (id: number, syncReference?: number, graphTop = kGraphEntries, window: Window = {}) =>
    request<Profile>(
      "GET",
      `/api/v1/sessions/${id}/profile?` +
        new URLSearchParams({
          graph_top: String(graphTop),
          ...(syncReference === undefined ? {} : { sync_reference: String(syncReference) }),
          ...windowQuery(window),
        }).toString(),
    ),
  // The call-graph entries of the functions of this name (a static function's may be several).
  graphEntries: (id: number, name: string, window: Window = {}) =>
    request<Profile>(
      "GET",
      `/api/v1/sessions/${id}/profile?` +
        new URLSearchParams({ top: "1", graph_function: name, ...windowQuery(window) }).toString(),
    ).then((p) => p.call_graph),
  // The function's lines (and, with instructions, its disassembly) with their samples.
  annotation: (id: number, name: string, instructions: boolean, window: Window = {}) =>
    request<Annotation>(
      "GET",
      `/api/v1/sessions/${id}/${instructions ? "disasm" : "lines"}?` +
        new URLSearchParams({ function: name, ...windowQuery(window) }).toString(),
    ),
  // A selection is a query string as the API takes it: "build_id=ab12&tag=lab" or "session=3"
  // ("session=3&task=sensor": what ran in that task).
  // The fleet page shows no call graph, so none is asked for; a task's profile (the profile
  // page with ?task=) asks for the call graph's busiest entries, as a session's does.
  selectionProfile: (selection: string, graphTop = 0) =>
    request<SelectionProfile>("GET", `/api/v1/profile?${selection}&graph_top=${graphTop}`),
  selectionGraphEntries: (selection: string, name: string) =>
    request<SelectionProfile>(
      "GET",
      `/api/v1/profile?${selection}&` +
        new URLSearchParams({ top: "1", graph_function: name }).toString(),
    ).then((p) => p.call_graph),
  // Two builds are refused (409 conflict) unless byName matches their functions by name.
  diff: (a: string, b: string, byName = false) =>
    request<Diff>(
      "GET",
      "/api/v1/diff?" +
        new URLSearchParams(byName ? { a, b, merge: "by_name" } : { a, b }).toString(),
    ),
  // Stacks as the server estimates them (gprof's attribution of time along the call graph),
  // one "root;caller;callee value" line each: never rebuilt here from the call graph.
  sessionFolded: (id: number, window: Window = {}) => {
    const query = new URLSearchParams(windowQuery(window)).toString();
    return requestText(`/api/v1/sessions/${id}/export/folded${query ? `?${query}` : ""}`);
  },
  selectionFolded: (selection: string) => requestText(`/api/v1/profile/export/folded?${selection}`),
  // The calling-context tree's stacks (cycles per path from entry/exit events, or a probe's
  // sampled stacks in samples): 422 when the session has no calling-context tree.
  sessionCctFolded: (id: number) => requestText(`/api/v1/sessions/${id}/export/cct-folded`),
  sessionCct: async (id: number) =>
    contextOf(await request<RawContext>("GET", `/api/v1/sessions/${id}/export/cct-json`)),
  tasks: (id: number) => request<Tasks>("GET", `/api/v1/sessions/${id}/tasks`),
  interrupts: (id: number) => request<Interrupts>("GET", `/api/v1/sessions/${id}/interrupts`),
  timeline: (id: number, window: TargetWindow = {}) => {
    const query = new URLSearchParams(windowQuery(window)).toString();
    return request<TraceEvents>(
      "GET",
      `/api/v1/sessions/${id}/timeline${query ? `?${query}` : ""}`,
    );
  },
  addBoard: (board: Record<string, unknown>) =>
    request<Board>("POST", "/api/v1/boards", JSON.stringify(board), "application/json"),
  startSession: (board: string) =>
    request<Session>("POST", `/api/v1/boards/${encodeURIComponent(board)}/sessions`),
  stopSession: (id: number) => request<Session>("POST", `/api/v1/sessions/${id}/stop`),
  firmware: () => request<FirmwareImage[]>("GET", "/api/v1/firmware"),
  uploadFirmware: (file: Blob) =>
    request<FirmwareStored>("PUT", "/api/v1/firmware", file, "application/octet-stream"),
  attachFirmware: (session: number, firmware: string) =>
    request<Session>(
      "PUT",
      `/api/v1/sessions/${session}/firmware`,
      JSON.stringify({ id: firmware }),
      "application/json",
    ),
  importSession: (file: Blob, query: Record<string, string>) =>
    request<Session>(
      "POST",
      "/api/v1/sessions/import?" + new URLSearchParams(query).toString(),
      file,
      "application/octet-stream",
    ),
};

// The export formats. The daemon's OpenAPI document (GET /api/v1/openapi.json) enumerates
// them for the session and the selection export routes, checked against gmon/export.cc's
// registry; a daemon whose document has no enum yet gets `knownFormats`, the registry as this
// dashboard was written (the selection has those that are not a session's records or bytes).
export interface ExportFormats {
  session: string[];
  selection: string[];
}

const knownFormats: ExportFormats = {
  session: [
    "gmon",
    "text",
    "text-intervals",
    "text-lines",
    "json",
    "csv",
    "folded",
    "speedscope",
    "dot",
    "svg",
    "ndjson",
    "raw",
    "cct-folded",
    "cct-speedscope",
    "cct-pprof",
    "cct-json",
  ],
  selection: [
    "gmon",
    "text",
    "text-intervals",
    "text-lines",
    "json",
    "csv",
    "folded",
    "speedscope",
    "dot",
    "svg",
    "cct-folded",
    "cct-speedscope",
    "cct-pprof",
    "cct-json",
  ],
};

// How a format reads on a button; any other is shown by its name.
const formatLabels: Record<string, string> = {
  gmon: "gmon.out",
  json: "JSON",
  csv: "CSV",
  folded: "folded stacks",
  ndjson: "NDJSON",
  dot: "DOT",
  svg: "SVG",
  "cct-folded": "measured folded stacks",
  "cct-speedscope": "measured speedscope",
  "cct-pprof": "measured pprof",
  "cct-json": "measured calling contexts (JSON)",
  tasks: "tasks and interrupts",
  "tasks-json": "tasks and interrupts (JSON)",
  trace: "timeline (Trace Event)",
};
export const formatLabel = (name: string) => formatLabels[name] ?? name;

let formats: Promise<ExportFormats> | null = null;

export function exportFormats(): Promise<ExportFormats> {
  formats ??= request<{
    paths: Record<
      string,
      { get?: { parameters?: { name: string; schema?: { enum?: string[] } }[] } }
    >;
  }>("GET", "/api/v1/openapi.json")
    .then((doc) => {
      const listed = (path: string) =>
        doc.paths[path]?.get?.parameters?.find((p) => p.name === "format")?.schema?.enum;
      return {
        session: listed("/api/v1/sessions/{id}/export/{format}") ?? knownFormats.session,
        selection: listed("/api/v1/profile/export/{format}") ?? knownFormats.selection,
      };
    })
    .catch(() => knownFormats);
  return formats;
}

export interface Download {
  format: string;
  label: string;
  href: string;
}

// Session downloads, named by the daemon (Content-Disposition).
export const downloads = (id: number, names: string[]): Download[] =>
  names.map((f) => ({
    format: f,
    label: formatLabel(f),
    href: `/api/v1/sessions/${id}/export/${f}`,
  }));

// A selection's downloads: the merged profile in every format a merge has.
export const selectionDownloads = (selection: string, names: string[]): Download[] =>
  names.map((f) => ({
    format: f,
    label: formatLabel(f),
    href: `/api/v1/profile/export/${f}?${selection}`,
  }));

// A WebSocket feed that reconnects until closed; each message is parsed JSON. Browsers cannot
// set headers on a WebSocket, so the token (needed with server.token_for_reads) goes as ?token=.
export function feed<T>(path: string, onMessage: (m: T) => void, onState: (open: boolean) => void) {
  let socket: WebSocket | null = null;
  let closed = false;
  let retry: number | undefined;
  const connect = () => {
    const token = apiToken.get();
    const query = token ? `?token=${encodeURIComponent(token)}` : "";
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${path}${query}`;
    socket = new WebSocket(url);
    socket.onopen = () => onState(true);
    socket.onmessage = (e) => onMessage(JSON.parse(String(e.data)) as T);
    socket.onclose = () => {
      onState(false);
      if (!closed) retry = window.setTimeout(connect, 1000);
    };
  };
  connect();
  return () => {
    closed = true;
    window.clearTimeout(retry);
    socket?.close();
  };
}
