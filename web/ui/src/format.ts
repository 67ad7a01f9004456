// Numbers and times as people read them on a bench.

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export const count = (n: number | null | undefined) =>
  n === null || n === undefined ? "—" : integer.format(n);
export const percent = (n: number) => `${n.toFixed(2)} %`;
export const seconds = (n: number) => n.toFixed(2);
// A share's 95 % interval as "±h" (half its width; the Wilson interval is not symmetric, so
// the bounds themselves go in the title).
export const plusMinus = (interval: [number, number] | undefined) =>
  interval ? `±${((interval[1] - interval[0]) / 2).toFixed(2)}` : "—";
export const intervalTitle = (interval: [number, number] | undefined, unit: string) =>
  interval
    ? `95 % Wilson score interval: ${interval[0].toFixed(2)}–${interval[1].toFixed(2)} ${unit}`
    : "";
export const signed = (n: number, digits = 2) =>
  (n > 0 ? "+" : n < 0 ? "−" : "±") + Math.abs(n).toFixed(digits);
export const signedCount = (n: number) =>
  (n > 0 ? "+" : n < 0 ? "−" : "±") + integer.format(Math.abs(n));

export function time(ns: number | null): string {
  if (!ns) return "—";
  return new Date(ns / 1e6).toISOString().replace("T", " ").slice(0, 19);
}

// Seconds since the epoch as the time of day, UTC and 24-hour as every time on these pages
// (time() above): the chart's axis, which would otherwise follow the browser's locale.
export const clock = (seconds: number) => new Date(seconds * 1000).toISOString().slice(11, 19);

export function duration(startNs: number, endNs: number | null): string {
  const s = Math.max(0, ((endNs ?? Date.now() * 1e6) - startNs) / 1e9);
  if (s < 60) return `${s.toFixed(0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// "bytes_discarded" -> "bytes discarded"
export const label = (key: string) => key.replace(/_/g, " ");

// Functions of the profiling runtime itself: their time is the profiler's, not the firmware's.
export const isOverhead = (name: string) =>
  name === "__gnu_mcount_nc" ||
  name === "_mcount_internal" ||
  name === "mcount" ||
  name.startsWith("rackprof_");
