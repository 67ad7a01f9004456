// The order of a sortable table's column (the profile's flat table, the diff's table): missing
// values first, numbers by value, anything else as text.
export type SortValue = string | number | null | undefined;

export function compareValues(a: SortValue, b: SortValue): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}
