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

// An error said at once to screen readers too (role "alert").
export function alertText(text: string, attrs: Attrs = {}): HTMLElement {
  return h("p", { class: "error", role: "alert", ...attrs }, text);
}

// A section headed by an <h2> of id `id` that labels it.
export function section(id: string, title: Child, ...children: Child[]): HTMLElement {
  return h("section", { "aria-labelledby": id }, h("h2", { id }, title), ...children);
}

// A form handled here, not sent by the browser: `submit` gets its data and the form itself.
export function form(
  attrs: Attrs,
  submit: (data: FormData, form: HTMLFormElement) => unknown,
  ...children: Child[]
): HTMLElement {
  const onsubmit = (e: Event) => {
    e.preventDefault();
    const el = e.target as HTMLFormElement;
    void submit(new FormData(el), el);
  };
  return h("form", { ...attrs, onsubmit }, ...children);
}

// A labelled <select> named `name`: its options are values shown as they are, or [value, text]
// pairs; the one whose value is `selected` is picked.
export function selectField(
  label: string,
  name: string,
  options: (string | [string, string])[],
  selected?: string | null,
): HTMLElement {
  return h(
    "label",
    {},
    label,
    h(
      "select",
      { name },
      options.map((o) => {
        const [value, text] = typeof o === "string" ? [o, o] : o;
        return h("option", { value, selected: selected !== undefined && value === selected }, text);
      }),
    ),
  );
}

// What a form does on submission, said in `result`: `doing` ("Uploading…") while `action`
// runs (it says itself what came of it), and its error, after `failure`, if it throws.
export async function attempt(
  result: Element,
  doing: string,
  action: () => Promise<unknown>,
  failure = "",
): Promise<void> {
  replace(result, h("p", { class: "muted" }, doing));
  try {
    await action();
  } catch (err) {
    replace(result, alertText(`${failure}${(err as Error).message}`));
  }
}
