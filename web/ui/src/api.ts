// The daemon's HTTP API (web/README.md lists it): typed fetches and WebSocket feeds.

export interface Counters {
  [name: string]: number;
}

export interface Board {
  name: string;
  link: string;
  state: string;
  last_error: string;
  reconnects: number;
  session: number | null;
  counters: Counters | null;
  storage_state: StorageState;
  storage_error: string | null;
}

// "storage_error" while the database's commits fail (disk full, I/O error): what arrives is
// counted lost (records_lost_storage) and a gap marks the span.
export type StorageState = "ok" | "storage_error";

export interface Session {
  id: number;
  board: string;
  link: string;
  protocol: string;
  format: string;
  addr_bytes: number;
  elf: { path: string; build_id: string; sha256: string };
  target: { build_id: string; text_lo: string; text_hi: string } | null; // from a framed HELLO
  state: string;
  started_ns: number;
  ended_ns: number | null;
  counters: Counters;
  storage_state: StorageState;
  storage_error: string | null;
}

export interface FlatRow {
  name: string;
  address: string;
  percent: number;
  cumulative_seconds: number;
  self_seconds: number;
  samples: number;
  calls: number | null;
  self_ms_per_call: number | null;
  total_ms_per_call: number | null;
}

export interface GraphLine {
  name: string;
  index: number;
  self_seconds: number;
  children_seconds: number;
  count: number;
  of: number;
}

export interface GraphEntry {
  index: number;
  name: string;
  cycle: number | null;
  spontaneous?: boolean;
  percent: number;
  self_seconds: number;
  children_seconds: number;
  called: number;
  self_calls: number;
  parents?: GraphLine[]; // absent for a cycle as a whole
  children?: GraphLine[];
  members?: { name: string; index: number }[];
}

export interface Profile {
  total_seconds: number;
  total_samples: number;
  seconds_per_sample: number;
  flat: FlatRow[];
  call_graph: GraphEntry[];
}

export interface LiveSnapshot {
  session: number;
  state: string;
  board?: string;
  link?: string;
  records_per_s?: number;
  bytes_per_s?: number;
  totals?: Counters;
  losses?: Counters;
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
  set: (token: string) => (token ? localStorage.setItem("rackprof.token", token) : localStorage.removeItem("rackprof.token")),
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

async function request<T>(method: string, path: string, body?: BodyInit, type?: string): Promise<T> {
  const headers: Record<string, string> = {};
  if (type) headers["Content-Type"] = type;
  const token = apiToken.get();
  if (token) headers.Authorization = `Bearer ${token}`;
  const reply = await fetch(path, { method, body, headers });
  if (reply.status === 204) return undefined as T;
  const text = await reply.text();
  let json: unknown = null;
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

export const api = {
  boards: () => request<Board[]>("GET", "/api/v1/boards"),
  sessions: (filter: Record<string, string> = {}) =>
    request<Session[]>("GET", "/api/v1/sessions?" + new URLSearchParams(filter)),
  session: (id: number) => request<Session>("GET", `/api/v1/sessions/${id}`),
  profile: (id: number) => request<Profile>("GET", `/api/v1/sessions/${id}/profile`),
  addBoard: (board: Record<string, unknown>) => request<Board>("POST", "/api/v1/boards", JSON.stringify(board), "application/json"),
  startSession: (board: string) =>
    request<Session>("POST", `/api/v1/boards/${encodeURIComponent(board)}/sessions`),
  stopSession: (id: number) => request<Session>("POST", `/api/v1/sessions/${id}/stop`),
  uploadFirmware: (file: Blob) =>
    request<{ id: string; build_id: string; functions: number; stored: boolean }>(
      "PUT",
      "/api/v1/firmware",
      file,
      "application/octet-stream",
    ),
  attachFirmware: (session: number, firmware: string) =>
    request<Session>("PUT", `/api/v1/sessions/${session}/firmware`, JSON.stringify({ id: firmware }), "application/json"),
  importSession: (file: Blob, query: Record<string, string>) =>
    request<Session>(
      "POST",
      "/api/v1/sessions/import?" + new URLSearchParams(query),
      file,
      "application/octet-stream",
    ),
};

// Session downloads, named by the daemon (Content-Disposition).
export const downloads = (id: number) => [
  { label: "gmon.out", href: `/api/v1/sessions/${id}/gmon.out` },
  { label: "CSV", href: `/api/v1/sessions/${id}/records.csv` },
  { label: "raw", href: `/api/v1/sessions/${id}/raw` },
];

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
