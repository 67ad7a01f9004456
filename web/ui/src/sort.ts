// The order of a sortable table's column (the profile's flat table, the diff's table): missing
// values first, numbers by value, anything else as text.
import { h } from "./dom";

export type SortValue = string | number | null | undefined;

export function compareValues(a: SortValue, b: SortValue): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

export type Sort<K extends string> = { key: K; descending: boolean };

// `rows` in the order of `value`, the largest first when `descending` (a new array).
export function sortedBy<T>(rows: readonly T[], value: (row: T) => SortValue, descending: boolean) {
  return [...rows].sort((x, y) => compareValues(value(x), value(y)) * (descending ? -1 : 1));
}

// A sortable table's header cells: each column's button sorts by it (numbers largest first)
// or, clicked again, reverses the order; `sort` is the order shown (null: the data's own).
export function sortHeaders<K extends string>(
  columns: readonly { key: K; label: string; numeric: boolean; title?: string }[],
  sort: Sort<K> | null,
  resort: (sort: Sort<K>) => void,
): HTMLElement[] {
  return columns.map((c) =>
    h(
      "th",
      {
        scope: "col",
        class: c.numeric ? "num" : "",
        title: c.title,
        "aria-sort": sort?.key === c.key ? (sort.descending ? "descending" : "ascending") : "none",
      },
      h(
        "button",
        {
          type: "button",
          class: "sort",
          "data-key": c.key,
          onclick: () =>
            resort({ key: c.key, descending: sort?.key === c.key ? !sort.descending : c.numeric }),
        },
        c.label,
        sort?.key === c.key ? (sort.descending ? " ▼" : " ▲") : "",
      ),
    ),
  );
}
