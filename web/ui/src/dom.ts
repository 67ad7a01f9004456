// A small element builder: the pages build their DOM with it instead of HTML strings, so
// text from the daemon (function and board names) is never parsed as markup.
type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

export function h(tag: string, attrs: Attrs = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") el.addEventListener(key.replace(/^on/, ""), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function append(el: Element, children: Child[]): void {
  for (const c of children) {
    if (Array.isArray(c)) {
      append(el, c);
      continue;
    }
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

// A link handled by the router (no page reload).
export function link(href: string, text: Child, attrs: Attrs = {}): HTMLElement {
  return h("a", { href, "data-route": "", ...attrs }, text);
}

// Download links (the daemon names the files, Content-Disposition), `separator` between them.
export function downloadLinks(
  items: { format: string; label: string; href: string }[],
  separator = ", ",
): Child[] {
  return items.map((d, i) => [
    i ? separator : "",
    h(
      "a",
      {
        href: d.href,
        download: "",
        class: "download",
        "data-kind": d.label,
        "data-format": d.format,
      },
      d.label,
    ),
  ]);
}

// A form field's text as FormData holds it: "" for a field the form does not have, or a file.
export function formText(data: FormData, name: string): string {
  const value = data.get(name);
  return typeof value === "string" ? value : "";
}
